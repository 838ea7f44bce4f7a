//! Replies captured from the reference tools under the simulator (ibsim 0.10 on
//! examples/fabrics/net with OpenSM 3.3.23; `smpquery -d -d`, `sminfo -d -d`,
//! `ibroute -d -d`, `perfquery -d -d [-x]` and `saquery -d -d` print the received MADs in hex).
//! The tests check that decoding gives exactly what those tools printed for the same reply,
//! and that encoding the decoded value gives the captured bytes back.

use super::link::{Speed, Width};
use super::*;
use crate::attribute::Attribute;
use crate::header::MadHeader;
use crate::sa::{rmpp_flags, RmppHeader, SaFrame};
use crate::smp::{MadView, SmpFrame};

pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Switch1's whole DR GetResp(NodeInfo) MAD as the simulator sent it.
pub const NODE_INFO_SWITCH1_MAD: &str = "01810181800000000001000113518fc400110000000000000000000000000000ffffffff000000000000000000000000000000000000000000000000000000000101020800000000002000000000000000200000000000000020000000080000000000a1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000250000000000000000403cf4070000000000000000000000";
/// SMP data (64 bytes) of the replies.
pub const NODE_INFO_SWITCH1: &str = "0101020800000000002000000000000000200000000000000020000000080000000000a100000000000000000000000000000000000000000000000000000000";
pub const NODE_INFO_HCA1: &str = "0101010200000000001000000000000000100000000000000010000100400000000000a101000000000000000000000000000000000000000000000000000000";
pub const NODE_DESC_SWITCH1: &str = "53776974636831000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
pub const NODE_DESC_HCA1: &str = "48636131000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
pub const PORT_INFO_SWITCH1_P0: &str = "0000000000000000fe80000000000000000100010000c04a00000ff900021f02745200111040000808030040000000000000011f080000000000000000300000";
pub const PORT_INFO_SWITCH1_P1: &str = "0000000000000000000000000000000000000000000000000000000000021f0274520011404000080804f0400000000000000000000000000000000000000000";
pub const PORT_INFO_HCA1_P1: &str = "0000000000000000fe80000000000000000200010050c04800000ff901021f0274520011404000080804e040000000000000201f000000000000000000300000";
pub const SWITCH_INFO_SWITCH1: &str = "78000000040000040000009000000040300000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
pub const SM_INFO: &str = "00000000002000000000000000000001000000560300000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
pub const LFT_SWITCH1_BLOCK0: &str = "ff00010302ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
/// GMP data (192 bytes) of the PMA replies; bytes past each attribute are the simulator's
/// stale buffer, not zero, and must be ignored.
pub const CLASS_PORT_INFO_HCA1: &str = "010112000000001200000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000250000000000000000409ef0070000000000000000000000";
pub const PORT_COUNTERS_HCA1_P1: &str = "000100000000000000000000000000000000000000000000000004c80000051000000011000000120000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000010202000000000000000000000000000000000000000000";
pub const PORT_COUNTERS_EXT_HCA1_P1: &str = "0001000000000000000000000000055800000000000005a0000000000000001300000000000000140000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000010202000000000000000000000000000000000000000000";

/// The encoding of a decoded value equals the captured bytes it came from (the capture's
/// reserved bits are zero, and bytes past the layout are not compared).
fn assert_reencodes(captured: &[u8], encoded: &[u8]) {
    assert_eq!(&captured[..encoded.len()], encoded);
}

#[test]
fn whole_mad_frames_node_info() {
    let mad = hex(NODE_INFO_SWITCH1_MAD);
    let view = MadView::parse(&mad).unwrap();
    assert!(view.is_response() && view.is_directed());
    assert_eq!(view.header.attribute_id, NodeInfo::ID);
    assert_eq!(view.smp_data(), &hex(NODE_INFO_SWITCH1)[..]);
    assert_eq!(MadHeader::decode(&mad).unwrap().mgmt_class, 0x81);
}

/// The directed-route framing of the same captured reply: D set (a reply), hop pointer and
/// hop count 0 (the request went to the local node), M_Key 0, permissive DrSLID/DrDLID.
#[test]
fn whole_mad_frames_directed_route_fields() {
    let mad = hex(NODE_INFO_SWITCH1_MAD);
    let f = SmpFrame::decode(&mad).unwrap();
    assert!(f.direction);
    assert_eq!((f.hop_pointer, f.hop_count), (0, 0));
    assert_eq!(f.m_key, 0);
    assert_eq!((f.dr_slid, f.dr_dlid), (0xffff, 0xffff));
    let view = MadView::parse(&mad).unwrap();
    assert!(view.status().is_ok(), "the D bit is not a status");
    assert_eq!(view.header.status, 0x8000);
    let mut reframed = mad.clone();
    f.write_fields(&mut reframed).unwrap();
    assert_eq!(reframed, mad);
}

/// smpquery -D nodeinfo 0 (Switch1) and 0,1 (Hca1).
#[test]
fn node_info_matches_smpquery() {
    let b = hex(NODE_INFO_SWITCH1);
    let n = NodeInfo::decode(&b).unwrap();
    assert_eq!((n.base_version, n.class_version), (1, 1));
    assert_eq!(n.kind(), NodeType::Switch);
    assert_eq!(n.num_ports, 8);
    assert_eq!(n.system_image_guid, 0x200000);
    assert_eq!(n.node_guid, 0x200000);
    assert_eq!(n.port_guid, 0x200000);
    assert_eq!(n.partition_cap, 8);
    assert_eq!(n.device_id, 0);
    assert_eq!(n.revision, 0xa1);
    assert_eq!(n.local_port_num, 0);
    assert_eq!(n.vendor_id, 0);
    assert_reencodes(&b, &n.to_bytes());

    let b = hex(NODE_INFO_HCA1);
    let n = NodeInfo::decode(&b).unwrap();
    assert_eq!(n.kind(), NodeType::Ca);
    assert_eq!(n.num_ports, 2);
    assert_eq!(n.system_image_guid, 0x100000);
    assert_eq!(n.node_guid, 0x100000);
    assert_eq!(n.port_guid, 0x100001);
    assert_eq!(n.partition_cap, 64);
    assert_eq!(n.revision, 0xa1);
    assert_eq!(n.local_port_num, 1);
    assert_reencodes(&b, &n.to_bytes());
    assert!(NodeInfo::decode(&b[..NodeInfo::WIRE_LEN - 1]).is_err());
    assert!(NodeInfo::decode(&[]).is_err());
}

#[test]
fn node_description_matches_smpquery() {
    let b = hex(NODE_DESC_SWITCH1);
    let d = NodeDescription::decode(&b).unwrap();
    assert_eq!(d.text(), "Switch1");
    assert_eq!(d.to_bytes().as_slice(), &b[..64]);
    assert_eq!(
        NodeDescription::decode(&hex(NODE_DESC_HCA1))
            .unwrap()
            .text(),
        "Hca1"
    );
    assert!(NodeDescription::decode(&b[..63]).is_err());
}

/// smpquery -D portinfo 0,1 1: Hca1 port 1, every field smpquery printed.
#[test]
fn port_info_hca_port_matches_smpquery() {
    let b = hex(PORT_INFO_HCA1_P1);
    let p = PortInfo::decode(&b).unwrap();
    assert_eq!(p.gid_prefix, 0xfe80_0000_0000_0000);
    assert_eq!(p.lid, 2);
    assert_eq!(p.master_sm_lid, 1);
    assert_eq!(p.capability_mask, 0x50c048);
    for bit in [
        capability::IS_TRAP_SUPPORTED,
        capability::IS_SL_MAPPING_SUPPORTED,
        capability::IS_EXTENDED_SPEEDS_SUPPORTED,
        capability::IS_CAPABILITY_MASK2_SUPPORTED,
        capability::IS_VENDOR_CLASS_SUPPORTED,
        capability::IS_CAPABILITY_MASK_NOTICE_SUPPORTED,
    ] {
        assert_ne!(p.capability_mask & bit, 0, "bit {bit:#x}");
    }
    assert_eq!(p.capability_mask & capability::IS_SM, 0);
    assert_eq!(p.diag_code, 0);
    assert_eq!(p.m_key_lease_period, 4089);
    assert_eq!(p.local_port_num, 1);
    assert_eq!(p.link_width_enabled, 2);
    assert_eq!(p.widths_enabled().iter().collect::<Vec<_>>(), [Width::X4]);
    assert_eq!(
        p.widths_supported().iter().collect::<Vec<_>>(),
        [Width::X1, Width::X2, Width::X4, Width::X8, Width::X12]
    );
    assert_eq!(p.width_active(), Some(Width::X4));
    assert_eq!(
        p.speeds_supported().iter().collect::<Vec<_>>(),
        [Speed::Sdr, Speed::Ddr, Speed::Qdr]
    );
    assert_eq!(p.state(), PortState::Active);
    assert_eq!(p.phys_state(), PhysState::LinkUp);
    assert_eq!(p.link_down_default_state, 2); // Polling
    assert_eq!((p.m_key_protect_bits, p.lmc), (0, 0));
    assert_eq!(p.speed_active(), Some(Speed::Sdr));
    assert_eq!(p.speeds_enabled().iter().collect::<Vec<_>>(), [Speed::Sdr]);
    assert_eq!(mtu_bytes(p.neighbor_mtu), Some(2048));
    assert_eq!(p.master_sm_sl, 0);
    assert_eq!(p.vl_cap, 4); // VL0-7
    assert_eq!((p.init_type, p.vl_high_limit), (0, 0));
    assert_eq!(
        (p.vl_arbitration_high_cap, p.vl_arbitration_low_cap),
        (8, 8)
    );
    assert_eq!(p.init_type_reply, 0);
    assert_eq!(mtu_bytes(p.mtu_cap), Some(2048));
    assert_eq!(p.vl_stall_count, 7);
    assert_eq!(p.hoq_life, 0);
    assert_eq!(p.operational_vls, 4);
    assert!(!p.partition_enforcement_inbound && !p.partition_enforcement_outbound);
    assert!(!p.filter_raw_inbound && !p.filter_raw_outbound);
    assert_eq!(
        (p.m_key_violations, p.p_key_violations, p.q_key_violations),
        (0, 0, 0)
    );
    assert_eq!(p.guid_cap, 32);
    assert!(!p.client_reregister);
    assert_eq!(p.multicast_pkey_trap_suppression_enabled, 0);
    assert_eq!(p.subnet_timeout, 31);
    assert_eq!(p.resp_time_value, 0);
    assert_eq!((p.local_phy_errors, p.overrun_errors), (0, 0));
    assert_eq!(p.max_credit_hint, 0);
    assert_eq!(p.link_round_trip_latency, 0);
    assert_eq!(p.capability_mask2, 0x30);
    assert_ne!(
        p.capability_mask2 & capability2::IS_LINK_WIDTH_2X_SUPPORTED,
        0
    );
    assert_ne!(
        p.capability_mask2 & capability2::IS_LINK_SPEED_HDR_SUPPORTED,
        0
    );
    assert_eq!(
        (
            p.link_speed_ext_active,
            p.link_speed_ext_supported,
            p.link_speed_ext_enabled
        ),
        (0, 0, 0)
    );
    assert_reencodes(&b, &p.to_bytes());
    assert!(PortInfo::decode(&b[..63]).is_err());
}

/// smpquery -D portinfo 0 0 and 0 1: Switch1's management port and an external port.
#[test]
fn port_info_switch_ports_match_smpquery() {
    let b = hex(PORT_INFO_SWITCH1_P0);
    let p = PortInfo::decode(&b).unwrap();
    assert_eq!((p.lid, p.master_sm_lid, p.local_port_num), (1, 1, 0));
    assert_eq!(p.capability_mask, 0xc04a);
    assert_ne!(p.capability_mask & capability::IS_SM, 0);
    assert_eq!(mtu_bytes(p.neighbor_mtu), Some(256));
    assert_eq!(mtu_bytes(p.mtu_cap), Some(1024));
    assert_eq!((p.vl_stall_count, p.hoq_life), (0, 0));
    assert_eq!(
        (p.guid_cap, p.subnet_timeout, p.resp_time_value),
        (1, 31, 8)
    );
    assert_eq!(p.state(), PortState::Active);
    assert_reencodes(&b, &p.to_bytes());

    let b = hex(PORT_INFO_SWITCH1_P1);
    let p = PortInfo::decode(&b).unwrap();
    assert_eq!((p.gid_prefix, p.lid, p.capability_mask), (0, 0, 0));
    assert_eq!(p.width_active(), Some(Width::X4));
    assert_eq!(p.widths_supported().best(), Some(Width::X12));
    assert_eq!(p.phys_state(), PhysState::LinkUp);
    assert_eq!((p.vl_stall_count, p.hoq_life), (7, 16));
    assert_eq!(mtu_bytes(p.neighbor_mtu), Some(2048));
    assert_eq!(p.speeds_supported().best(), Some(Speed::Qdr));
    assert_reencodes(&b, &p.to_bytes());
}

/// smpquery -D switchinfo 0.
#[test]
fn switch_info_matches_smpquery() {
    let b = hex(SWITCH_INFO_SWITCH1);
    let s = SwitchInfo::decode(&b).unwrap();
    assert_eq!(s.linear_fdb_cap, 30720);
    assert_eq!(s.random_fdb_cap, 0);
    assert_eq!(s.multicast_fdb_cap, 1024);
    assert_eq!(s.linear_fdb_top, 4);
    assert_eq!(
        (
            s.default_port,
            s.default_multicast_primary_port,
            s.default_multicast_not_primary_port
        ),
        (0, 0, 0)
    );
    assert_eq!(s.life_time_value, 18);
    assert!(!s.port_state_change);
    assert_eq!(s.optimized_sl_to_vl_mapping_programming, 0);
    assert_eq!(s.lids_per_port, 0);
    assert_eq!(s.partition_enforcement_cap, 64);
    assert!(!s.inbound_enforcement_cap && !s.outbound_enforcement_cap);
    assert!(s.filter_raw_inbound_cap && s.filter_raw_outbound_cap);
    assert!(!s.enhanced_port0);
    assert_eq!(s.multicast_fdb_top, 0);
    assert_reencodes(&b, &s.to_bytes());
    assert!(SwitchInfo::decode(&b[..19]).is_err());
}

/// ibroute -D 0: LID 1 -> port 0, 2 -> 1, 3 -> 3, 4 -> 2; LID 0 and 5.. unset.
#[test]
fn lft_block_matches_ibroute() {
    let b = hex(LFT_SWITCH1_BLOCK0);
    let l = LinearForwardingTableBlock::decode(&b).unwrap();
    assert_eq!(
        l.routes(0).collect::<Vec<_>>(),
        [(1, 0), (2, 1), (3, 3), (4, 2)]
    );
    assert_eq!(l.port_for(0, 3), Some(3));
    assert_eq!(l.port_for(0, 0), None);
    assert_eq!(l.port_for(0, 5), None);
    assert_eq!(l.to_bytes().as_slice(), &b[..]);
    assert!(LinearForwardingTableBlock::decode(&b[..10]).is_err());
}

/// sminfo: "sm lid 1 sm guid 0x200000, activity count 86 priority 0 state 3 SMINFO_MASTER".
#[test]
fn sm_info_matches_sminfo() {
    let b = hex(SM_INFO);
    let s = SmInfo::decode(&b).unwrap();
    assert_eq!(s.guid, 0x200000);
    assert_eq!(s.sm_key, 1); // OpenSM's default SM_Key, returned to an SMP Get
    assert_eq!(s.act_count, 86);
    assert_eq!(s.priority, 0);
    assert_eq!(s.state(), SmState::Master);
    assert_eq!(s.state_name(), "Master");
    assert_reencodes(&b, &s.to_bytes());
    assert!(SmInfo::decode(&b[..23]).is_err());
}

/// perfquery: "(CapMask: 0x1200 CapMask2: 0x0000000)".
#[test]
fn class_port_info_matches_perfquery() {
    let b = hex(CLASS_PORT_INFO_HCA1);
    let c = ClassPortInfo::decode(&b).unwrap();
    assert_eq!((c.base_version, c.class_version), (1, 1));
    assert_eq!(c.capability_mask, 0x1200);
    assert_eq!(c.capability_mask2, 0);
    assert_eq!(c.resp_time_value, 18);
    assert!(c.has_extended_counters() && c.has_ietf_counters() && c.has_xmit_wait());
    assert_eq!(c.capability_mask & pma_capability::ALL_PORT_SELECT, 0);
    assert_eq!((c.redirect_lid, c.trap_lid, c.redirect_qp), (0, 0, 0));
    assert_reencodes(&b, &c.to_bytes());
    assert!(ClassPortInfo::decode(&b[..71]).is_err());
}

/// perfquery 2 1: Hca1 port 1.
#[test]
fn port_counters_match_perfquery() {
    let b = hex(PORT_COUNTERS_HCA1_P1);
    let c = PortCounters::decode(&b).unwrap();
    assert_eq!(
        (c.port_select, c.counter_select, c.counter_select2),
        (1, 0, 0)
    );
    let printed = [
        ("SymbolErrorCounter", 0),
        ("LinkErrorRecoveryCounter", 0),
        ("LinkDownedCounter", 0),
        ("PortRcvErrors", 0),
        ("PortRcvRemotePhysicalErrors", 0),
        ("PortRcvSwitchRelayErrors", 0),
        ("PortXmitDiscards", 0),
        ("PortXmitConstraintErrors", 0),
        ("PortRcvConstraintErrors", 0),
        ("LocalLinkIntegrityErrors", 0),
        ("ExcessiveBufferOverrunErrors", 0),
        ("VL15Dropped", 0),
        ("PortXmitData", 1224),
        ("PortRcvData", 1296),
        ("PortXmitPkts", 17),
        ("PortRcvPkts", 18),
        ("PortXmitWait", 0),
    ];
    let got: Vec<(&str, u64)> = c.counters().iter().map(|f| (f.name, f.value)).collect();
    assert_eq!(got, printed);
    // perfquery prints the table's names: PortSelect and CounterSelect head its output too.
    assert_eq!(PortCounters::FIELDS[0].name, "PortSelect");
    assert_eq!(PortCounters::FIELDS[1].name, "CounterSelect");
    assert_reencodes(&b, &c.to_bytes());
    assert!(PortCounters::decode(&b[..43]).is_err());
}

/// perfquery -x 2 1.
#[test]
fn port_counters_extended_match_perfquery() {
    let b = hex(PORT_COUNTERS_EXT_HCA1_P1);
    let c = PortCountersExtended::decode(&b).unwrap();
    assert_eq!((c.port_select, c.counter_select), (1, 0));
    let got: Vec<(&str, u64)> = c.counters().iter().map(|f| (f.name, f.value)).collect();
    assert_eq!(
        got,
        [
            ("PortXmitData", 1368),
            ("PortRcvData", 1440),
            ("PortXmitPkts", 19),
            ("PortRcvPkts", 20),
            ("PortUnicastXmitPkts", 0),
            ("PortUnicastRcvPkts", 0),
            ("PortMulticastXmitPkts", 0),
            ("PortMulticastRcvPkts", 0),
        ]
    );
    assert_reencodes(&b, &c.to_bytes());
    assert!(PortCountersExtended::decode(&b[..71]).is_err());
}

/// `saquery -d -d` response MAD (168 bytes as printed; the rest of the 256 is unprinted).
pub const SA_NR_RESPONSE: &str = "0103029200000000000100004762b03900110000000000000000010000000000000000000000000000000000000e00000000000000000001000200000101010200000000001000000000000000100000000000000010000100400000000000a1010000004863613100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
/// `saquery -d -d` response MAD (128 bytes as printed; the rest of the 256 is unprinted).
pub const SA_PIR_RESPONSE: &str = "0103029200000000000100007db46e7f00120000000000000000010000000000000000000000000000000000000900000000000000000001000201000000000000000000fe80000000000000000200010050c04800000ff901021f0274520011404000080804e040000000000000201f00000000000000000030000000000000";
/// `saquery -d -d` response MAD (88 bytes as printed; the rest of the 256 is unprinted).
pub const SA_SMIR_RESPONSE: &str = "0103029200000000000100007b0f9c2a001800000000000000000100000000000000000000000000000000000004000000000000000000000001000000000000002000000000000000000000000000570300000000000000";
/// `saquery -d -d` response MAD (88 bytes as printed; the rest of the 256 is unprinted).
pub const SA_LR_RESPONSE: &str = "0103029200000000000100002d35113e002000000000000000000100000000000000000000000000000000000001000000000000000000010001010100020000000102020004000000010303000300000001040400030000";
/// `saquery -d -d` response MAD (256 bytes as printed; the rest of the 256 is unprinted).
pub const SA_PR_RESPONSE: &str = "01030292000000000001000069aaf162003500000000000000000100000000000000000000000000000000000008000000000000000000000000000000000000fe800000000000000000000000200000fe80000000000000000000000020000000010001000000000080ffff0000838380000000000000000000000000000000fe800000000000000000000000200000fe80000000000000000000000010000100010002000000000080ffff0000838392000000000000000000000000000000fe800000000000000000000000200000fe800000000000000000000000200001000000000000000025000000000000000080e8f4070000000000000000000000";

/// A printed SA response padded to a whole MAD, and its SA data (from byte 56).
fn sa_mad(printed: &str) -> Vec<u8> {
    let mut mad = hex(printed);
    mad.resize(crate::header::MAD_SIZE, 0);
    mad
}

/// The records saquery printed, `len` bytes each, `stride` apart, from the SA data.
fn sa_records(printed: &str, len: usize) -> Vec<Vec<u8>> {
    let mad = hex(printed);
    let view_mad = sa_mad(printed);
    let view = MadView::parse(&view_mad).unwrap();
    let stride = usize::from(view.sa_attribute_offset()) * 8;
    let data = &mad[SaFrame::data.spec.bytes().start..];
    crate::sa::split_records(data, view.sa_attribute_offset(), len, None)
        .unwrap()
        .into_iter()
        .map(|r| {
            assert!(stride >= len);
            r.to_vec()
        })
        .collect()
}

/// saquery NR 2: LID 2, Hca1.
#[test]
fn sa_node_record_matches_saquery() {
    use crate::sa::NodeRecord;
    let recs = sa_records(SA_NR_RESPONSE, NodeRecord::WIRE_LEN);
    assert_eq!(recs.len(), 1);
    let mad = sa_mad(SA_NR_RESPONSE);
    assert_eq!(MadView::parse(&mad).unwrap().sa_attribute_offset(), 14); // 112 bytes
    assert_eq!(NodeRecord::attribute_offset_words(), 14);
    assert_eq!(NodeRecord::padded_len(), 112);
    let r = NodeRecord::decode(&recs[0]).unwrap();
    assert_eq!(r.lid, 2);
    let n = &r.node_info;
    assert_eq!((n.base_version, n.class_version), (1, 1));
    assert_eq!(n.kind(), NodeType::Ca);
    assert_eq!(n.num_ports, 2);
    assert_eq!(n.system_image_guid, 0x100000);
    assert_eq!(n.node_guid, 0x100000);
    assert_eq!(n.port_guid, 0x100001);
    assert_eq!(n.partition_cap, 0x40);
    assert_eq!(
        (n.device_id, n.revision, n.local_port_num, n.vendor_id),
        (0, 0xa1, 1, 0)
    );
    assert_eq!(r.node_description.text(), "Hca1");
    assert_eq!(&r.to_bytes()[..], &recs[0][..]);
}

/// saquery PIR 2: Hca1 port 1, the same PortInfo smpquery read directly.
#[test]
fn sa_port_info_record_matches_saquery() {
    use crate::sa::PortInfoRecord;
    let recs = sa_records(SA_PIR_RESPONSE, PortInfoRecord::WIRE_LEN);
    assert_eq!(recs.len(), 1);
    let r = PortInfoRecord::decode(&recs[0]).unwrap();
    assert_eq!((r.endport_lid, r.port_num, r.options), (2, 1, 0));
    let direct = PortInfo::decode(&hex(PORT_INFO_HCA1_P1)).unwrap();
    // The SA's copy is the PortInfo the SM read: identical to the SMP reply.
    assert_eq!(r.port_info, direct);
    assert_eq!(r.port_info.capability_mask, 0x50c048);
    assert_eq!(r.port_info.m_key_lease_period, 4089);
    assert_eq!(&r.to_bytes()[..], &recs[0][..]);
}

/// saquery SMIR: LID 1, GUID 0x200000, ActCount 87, Priority 0, SMState 3 (SM_Key hidden).
#[test]
fn sa_sm_info_record_matches_saquery() {
    use crate::sa::SmInfoRecord;
    let recs = sa_records(SA_SMIR_RESPONSE, SmInfoRecord::WIRE_LEN);
    assert_eq!(recs.len(), 1);
    let r = SmInfoRecord::decode(&recs[0]).unwrap();
    assert_eq!(r.lid, 1);
    let s = &r.sm_info;
    assert_eq!(
        (s.guid, s.sm_key, s.act_count, s.priority),
        (0x200000, 0, 87, 0)
    );
    assert_eq!(s.state(), SmState::Master);
    assert_eq!(&r.to_bytes()[..], &recs[0][..]);
}

/// saquery LR 1: four records from LID 1, AttributeOffset 1 (8 bytes).
#[test]
fn sa_link_records_match_saquery() {
    use crate::sa::LinkRecord;
    let recs = sa_records(SA_LR_RESPONSE, LinkRecord::WIRE_LEN);
    // The printed part holds 4 records; the zero padding after it splits into empty ones.
    let links: Vec<_> = recs
        .iter()
        .map(|r| LinkRecord::decode(r).unwrap())
        .filter(|l| l.from_lid != 0)
        .map(|l| (l.from_lid, l.from_port, l.to_port, l.to_lid))
        .collect();
    assert_eq!(
        links,
        [(1, 1, 1, 2), (1, 2, 2, 4), (1, 3, 3, 3), (1, 4, 4, 3)]
    );
    assert_eq!(
        LinkRecord::decode(&recs[1]).unwrap().to_bytes().as_slice(),
        &recs[1][..]
    );
}

/// saquery PR: the first two records (the third saquery printed is stale buffer).
#[test]
fn sa_path_records_match_saquery() {
    use crate::sa::PathRecord;
    let recs = sa_records(SA_PR_RESPONSE, PathRecord::WIRE_LEN);
    assert!(recs.len() >= 2);
    let gid = |prefix: u64, guid: u64| {
        let mut g = [0u8; 16];
        g[..8].copy_from_slice(&prefix.to_be_bytes());
        g[8..].copy_from_slice(&guid.to_be_bytes());
        g
    };
    let a = PathRecord::decode(&recs[0]).unwrap();
    assert_eq!(a.service_id, 0);
    assert_eq!(a.dgid, gid(0xfe80 << 48, 0x200000));
    assert_eq!(a.sgid, gid(0xfe80 << 48, 0x200000));
    assert_eq!((a.dlid, a.slid), (1, 1));
    assert!(!a.raw_traffic);
    assert_eq!((a.flow_label, a.hop_limit, a.traffic_class), (0, 0, 0));
    assert!(a.reversible); // num_path_revers 0x80
    assert_eq!(a.numb_path, 0);
    assert_eq!(a.p_key, 0xffff);
    assert_eq!((a.qos_class, a.sl), (0, 0));
    assert_eq!((a.mtu_selector, a.mtu), (2, 3)); // 0x83: exactly 1024 (switch port 0's MtuCap)
    assert_eq!((a.rate_selector, a.rate), (2, 3)); // exactly 10 Gb/s (4X SDR)
    assert_eq!((a.packet_life_time_selector, a.packet_life_time), (2, 0));
    assert_eq!(a.preference, 0);
    assert_eq!(&a.to_bytes()[..], &recs[0][..]);

    let b = PathRecord::decode(&recs[1]).unwrap();
    assert_eq!(b.sgid, gid(0xfe80 << 48, 0x100001));
    assert_eq!((b.dlid, b.slid), (1, 2));
    assert_eq!((b.packet_life_time_selector, b.packet_life_time), (2, 18)); // 0x92
    assert_eq!(&b.to_bytes()[..], &recs[1][..]);
}

/// saquery sent its NodeRecord query as SubnAdmGetTable with ComponentMask LID: the
/// request our framing builds for the same lookup must match it byte for byte (TID aside).
#[test]
fn sa_node_record_request_matches_saquery() {
    use crate::header::{class, method};
    use crate::sa::{build_sa, comp_mask, NodeRecord};
    let template = NodeRecord {
        lid: 2,
        ..Default::default()
    };
    let header = MadHeader::request(class::SUBN_ADM, method::GET_TABLE, NodeRecord::ID, 0);
    let frame = SaFrame {
        component_mask: comp_mask::node_record::LID,
        ..Default::default()
    };
    let mad = build_sa(&header, &frame, &template.to_bytes());
    let reference = hex(concat!(
        "01030212000000000000000000000000", // TID zeroed below
        "00110000000000000000000000000000",
        "00000000000000000000000000000000",
        "00000000000000010002000000000000",
    ));
    let mut ours = mad[..64].to_vec();
    ours[8..16].fill(0);
    assert_eq!(ours, reference);
}

/// The SA replies OpenSM sends through the simulator carry RMPP byte 26 = 0x01 (Active, neither
/// First nor Last, RMPPVersion 0, PayloadLength 0): a reader of single-MAD replies must
/// still find the records in them.
#[test]
fn sa_records_in_simulator_reply() {
    use crate::sa::{records_in_mad, LinkRecord};
    let mad = sa_mad(SA_LR_RESPONSE);
    assert_eq!(&mad[24..36], &hex("000001000000000000000000")[..]);
    let frame = SaFrame::decode(&mad).unwrap();
    assert_eq!(
        frame.rmpp,
        RmppHeader {
            rmpp_flags: rmpp_flags::ACTIVE,
            ..Default::default()
        }
    );
    assert_eq!((frame.sm_key, frame.attribute_offset), (0, 1));
    assert_eq!(frame.component_mask, 1);
    let view = MadView::parse(&mad).unwrap();
    let recs = records_in_mad(&view, LinkRecord::WIRE_LEN).expect("records of a single MAD");
    let first = LinkRecord::decode(recs[0]).unwrap();
    assert_eq!((first.from_lid, first.from_port, first.to_lid), (1, 1, 2));
}

/// The AttributeOffset OpenSM put in each reply is the record's padded length in words.
#[test]
fn sa_attribute_offsets_match_opensm() {
    use crate::sa::{LinkRecord, NodeRecord, PathRecord, PortInfoRecord, SmInfoRecord};
    let offset = |printed: &str| {
        let mad = sa_mad(printed);
        MadView::parse(&mad).unwrap().sa_attribute_offset()
    };
    assert_eq!(offset(SA_NR_RESPONSE), NodeRecord::attribute_offset_words());
    assert_eq!(
        offset(SA_PIR_RESPONSE),
        PortInfoRecord::attribute_offset_words()
    );
    assert_eq!(
        offset(SA_SMIR_RESPONSE),
        SmInfoRecord::attribute_offset_words()
    );
    assert_eq!(offset(SA_LR_RESPONSE), LinkRecord::attribute_offset_words());
    assert_eq!(offset(SA_PR_RESPONSE), PathRecord::attribute_offset_words());
    assert_eq!(
        (SmInfoRecord::record_len(), SmInfoRecord::padded_len()),
        (28, 32)
    );
}

// ---- The counters of fast links, the detail attributes, FDR10 ----
//
// Captured on examples/fabrics/fdr10.topo (ibsim 0.10, OpenSM 3.3.23): ibsim answers
// Mellanox's MlnxExtPortInfo (with FDR10 where both ends enable it) and the two detail
// attributes. It answers neither PortCountersExtended's additional counters (its
// CapabilityMask2 is 0) nor PortExtendedSpeedsCounters nor PortInfoExtended: those are
// laid out by hand from rdma-core's libibmad field table (fields.c: IB_PC_EXT_ERR_*,
// IB_PESC_*, IB_PESC_RSFEC_*, IB_PORT_EXT_*), bit offsets as the table gives them.

/// `smpquery -d -d mlnxextportinfo 6 1`: sw-fdr10-1 port 1, an FDR10 link. smpquery printed
/// StateChangeEnable 0x00, LinkSpeedSupported 0x01, LinkSpeedEnabled 0x01,
/// LinkSpeedActive 0x01.
pub const MLNX_EXT_PORT_INFO_FDR10: &str = "00000000000000010000000100000001000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
/// The same of port 2, a QDR link: every field 0x00.
pub const MLNX_EXT_PORT_INFO_QDR: &str = "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
/// `perfquery -d -d -E 6 1` after ibsim's `PerformanceSet` of 3, 5, 7, 11, 13 and 65535.
pub const RCV_ERROR_DETAILS_SW1_P1: &str = "00010000000300050007000b000dffff0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000010202000000000000000000000000000000000000000000";
/// `perfquery -d -d -D 6 1` after setting 17, 19, 23 and 65535.
pub const XMIT_DISCARD_DETAILS_SW1_P1: &str = "00010000001100130017ffff000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000010202000000000000000000000000000000000000000000";

/// A PortInfo of a port that is up at QDR on no extended speed: the one libibnetdisc asks
/// MlnxExtPortInfo about.
fn qdr_port_info() -> PortInfo {
    let mut b = hex(PORT_INFO_HCA1_P1);
    b[32] = (7 << 4) | 4; // LinkSpeedSupported SDR|DDR|QDR, PortState Active
    b[35] = (4 << 4) | 7; // LinkSpeedActive QDR, LinkSpeedEnabled SDR|DDR|QDR
    PortInfo::decode(&b).unwrap()
}

/// smpquery: LinkSpeedSupported/Enabled/Active 0x01, FDR10's bit; port 2 all zero.
#[test]
fn mlnx_ext_port_info_matches_smpquery_and_gives_fdr10() {
    let b = hex(MLNX_EXT_PORT_INFO_FDR10);
    let m = MlnxExtPortInfo::decode(&b).unwrap();
    assert_eq!(
        (
            m.state_change_enable,
            m.link_speed_supported,
            m.link_speed_enabled,
            m.link_speed_active
        ),
        (0, 1, 1, 1)
    );
    assert_eq!(<MlnxExtPortInfo as Attribute>::ID, 0xff90);
    let names: Vec<&str> = MlnxExtPortInfo::FIELDS.iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "StateChangeEnable",
            "LinkSpeedSupported",
            "LinkSpeedEnabled",
            "LinkSpeedActive"
        ]
    );
    assert_reencodes(&b, &m.to_bytes());
    assert!(MlnxExtPortInfo::decode(&b[..15]).is_err());

    let p = qdr_port_info();
    assert!(p.may_run_fdr10());
    assert_eq!(p.speed_active(), Some(Speed::Qdr));
    assert_eq!(p.speed_active_with(Some(&m)), Some(Speed::Fdr10));
    assert!(p.speeds_supported_with(Some(&m)).contains(Speed::Fdr10));
    assert!(p.speeds_enabled_with(Some(&m)).contains(Speed::Fdr10));
    assert_eq!(p.speeds_supported_with(Some(&m)).best(), Some(Speed::Fdr10));

    let qdr = MlnxExtPortInfo::decode(&hex(MLNX_EXT_PORT_INFO_QDR)).unwrap();
    assert_eq!(p.speed_active_with(Some(&qdr)), Some(Speed::Qdr));
    assert!(!p.speeds_supported_with(Some(&qdr)).contains(Speed::Fdr10));
    assert_eq!(p.speed_active_with(None), Some(Speed::Qdr));
}

/// An extended speed in PortInfo wins over the vendor bit (ibnetdiscover prints FDR for a
/// port whose LinkSpeedExtActive says FDR); a port not at QDR is never asked.
#[test]
fn extended_speed_wins_over_fdr10_and_only_qdr_ports_are_asked() {
    let m = MlnxExtPortInfo::decode(&hex(MLNX_EXT_PORT_INFO_FDR10)).unwrap();
    let mut p = qdr_port_info();
    p.capability_mask |= capability::IS_EXTENDED_SPEEDS_SUPPORTED;
    p.link_speed_ext_active = 1;
    assert!(!p.may_run_fdr10());
    assert_eq!(p.speed_active_with(Some(&m)), Some(Speed::Fdr));
    let mut sdr = qdr_port_info();
    sdr.link_speed_active = 1;
    assert!(!sdr.may_run_fdr10());
    let mut down = qdr_port_info();
    down.port_phys_state = PhysState::Polling.code();
    assert!(!down.may_run_fdr10());
}

/// The devices libibnetdisc asks MlnxExtPortInfo of: by device ID, and Bull's by vendor
/// and device ID.
#[test]
fn mlnx_ext_port_info_is_asked_of_the_devices_rdma_core_lists() {
    for device in [
        0xc738, 0xc73b, 0xc839, 0xcb20, 0xcf08, 0xcf09, 0xd2f0, 0x1003, 0x1011, 0x101b, 0xa2d2,
    ] {
        assert!(MlnxExtPortInfo::answered_by(0x02c9, device), "{device:#x}");
    }
    for device in [0xc737, 0xc73c, 0x1002, 0x101c, 0x0000, 0xb924] {
        assert!(!MlnxExtPortInfo::answered_by(0x02c9, device), "{device:#x}");
    }
    // Bull's OEM parts, only under Bull's vendor ID.
    for device in [0x1b02, 0x1bd3, 0x1bf0, 0x1b33, 0x1bc5] {
        assert!(MlnxExtPortInfo::answered_by(0x119f, device), "{device:#x}");
        assert!(!MlnxExtPortInfo::answered_by(0x02c9, device), "{device:#x}");
    }
}

/// perfquery -E 6 1: "PortLocalPhysicalErrors 3, PortMalformedPktErrors 5,
/// PortBufferOverrunErrors 7, PortDLIDMappingErrors 11, PortVLMappingErrors 13,
/// PortLoopingErrors 65535".
#[test]
fn port_rcv_error_details_match_perfquery() {
    let b = hex(RCV_ERROR_DETAILS_SW1_P1);
    let d = PortRcvErrorDetails::decode(&b).unwrap();
    assert_eq!((d.port_select, d.counter_select), (1, 0));
    let got: Vec<(&str, u64, bool)> = d
        .counters()
        .iter()
        .map(|c| (c.name, c.value, c.saturated()))
        .collect();
    assert_eq!(
        got,
        [
            ("PortLocalPhysicalErrors", 3, false),
            ("PortMalformedPktErrors", 5, false),
            ("PortBufferOverrunErrors", 7, false),
            ("PortDLIDMappingErrors", 11, false),
            ("PortVLMappingErrors", 13, false),
            ("PortLoopingErrors", 65535, true),
        ]
    );
    assert!(d.counters().iter().all(|c| c.kind == CounterKind::Detail));
    assert_eq!(<PortRcvErrorDetails as Attribute>::ID, 0x15);
    assert_reencodes(&b, &d.to_bytes());
    assert!(PortRcvErrorDetails::decode(&b[..15]).is_err());
}

/// perfquery -D 6 1: "PortInactiveDiscards 17, PortNeighborMTUDiscards 19,
/// PortSwLifetimeLimitDiscards 23, PortSwHOQLifetimeLimitDiscards 65535".
#[test]
fn port_xmit_discard_details_match_perfquery() {
    let b = hex(XMIT_DISCARD_DETAILS_SW1_P1);
    let d = PortXmitDiscardDetails::decode(&b).unwrap();
    let got: Vec<(&str, u64)> = d.counters().iter().map(|c| (c.name, c.value)).collect();
    assert_eq!(
        got,
        [
            ("PortInactiveDiscards", 17),
            ("PortNeighborMTUDiscards", 19),
            ("PortSwLifetimeLimitDiscards", 23),
            ("PortSwHOQLifetimeLimitDiscards", 65535),
        ]
    );
    assert_eq!(<PortXmitDiscardDetails as Attribute>::ID, 0x16);
    assert_reencodes(&b, &d.to_bytes());
    assert!(PortXmitDiscardDetails::decode(&b[..11]).is_err());
    // Which PortCounters counter each attribute explains.
    let explained: Vec<(&str, &str)> = perf_attrs::BREAKDOWNS
        .iter()
        .map(|b| (b.explains, b.attribute))
        .collect();
    assert_eq!(
        explained,
        [
            ("PortRcvErrors", "PortRcvErrorDetails"),
            ("PortXmitDiscards", "PortXmitDiscardDetails")
        ]
    );
}

/// ibsim's PortCountersExtended (CapabilityMask2 0) leaves stale bytes where the additional
/// counters would be (bytes 168-170, inside PortXmitWait's 64-bit field): they are not
/// counters unless ClassPortInfo says so.
#[test]
fn additional_extended_counters_only_with_the_capability() {
    let b = hex(PORT_COUNTERS_EXT_HCA1_P1);
    let c = PortCountersExtended::decode(&b).unwrap();
    let ibsim = ClassPortInfo::decode(&hex(CLASS_PORT_INFO_HCA1)).unwrap();
    assert!(!ibsim.has_additional_extended_counters());
    let names: Vec<&str> = c
        .counters_for(ibsim.capabilities())
        .map(|c| c.name)
        .collect();
    assert_eq!(names, perf_attrs::EXTENDED_COUNTER_NAMES);
    assert_ne!(c.port_xmit_wait, 0, "the stale bytes are there");
}

/// PortCountersExtended with the additional counters, laid out by hand from libibmad's
/// IB_PC_EXT_ERR_* offsets: CounterSelect2 at bit 32, SymbolErrorCounter at 576, each
/// following counter 64 bits on, QP1Dropped at 1408. Values above what the 16- and 8-bit
/// PortCounters fields hold.
#[test]
fn golden_port_counters_extended_additional_counters() {
    let mut b = [0u8; 192];
    b[1] = 3; // PortSelect
    b[4..8].copy_from_slice(&0x0000_3fffu32.to_be_bytes()); // CounterSelect2
    b[8..16].copy_from_slice(&(1u64 << 40).to_be_bytes()); // PortXmitData
    let additional: [(usize, u64); 14] = [
        (72, 70_000),        // SymbolErrorCounter: above 65535
        (80, 300),           // LinkErrorRecoveryCounter: above 255
        (88, 256),           // LinkDownedCounter
        (96, 1 << 33),       // PortRcvErrors
        (104, 5),            // PortRcvRemotePhysicalErrors
        (112, 6),            // PortRcvSwitchRelayErrors
        (120, 65_536),       // PortXmitDiscards
        (128, 7),            // PortXmitConstraintErrors
        (136, 8),            // PortRcvConstraintErrors
        (144, 16),           // LocalLinkIntegrityErrors: above 15
        (152, 17),           // ExcessiveBufferOverrunErrors
        (160, 9),            // VL15Dropped
        (168, u64::MAX - 1), // PortXmitWait
        (176, 10),           // QP1Dropped
    ];
    for (at, v) in additional {
        b[at..at + 8].copy_from_slice(&v.to_be_bytes());
    }
    let c = PortCountersExtended::decode(&b).unwrap();
    assert_eq!((c.port_select, c.counter_select2), (3, 0x3fff));
    assert_eq!(c.symbol_error_counter, 70_000);
    assert_eq!(c.link_downed_counter, 256);
    assert_eq!(c.local_link_integrity_errors, 16);
    assert_eq!(c.qp1_dropped, 10);
    let all = PmaCapabilities::new(
        pma_capability::IS_EXTENDED_WIDTH_SUPPORTED
            | pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED
            | pma_capability::IS_QP1_DROPPED_SUPPORTED,
        pma_capability2::IS_ADDITIONAL_PORT_COUNTERS_EXTENDED_SUPPORTED,
    );
    let got: Vec<(&str, u64)> = c
        .counters_for(all)
        .skip(8)
        .map(|c| (c.name, c.value))
        .collect();
    let expected: Vec<(&str, u64)> = perf_attrs::ADDITIONAL_EXTENDED_COUNTERS
        .iter()
        .copied()
        .zip(additional.iter().map(|(_, v)| *v))
        .collect();
    assert_eq!(got, expected);
    assert!(c.counters_for(all).all(|c| !c.saturated()));
    // QP1Dropped needs IsQP1DroppedSupported as well.
    let no_qp1 = PmaCapabilities::new(
        pma_capability::IS_EXTENDED_WIDTH_SUPPORTED,
        pma_capability2::IS_ADDITIONAL_PORT_COUNTERS_EXTENDED_SUPPORTED,
    );
    assert!(!c.counters_for(no_qp1).any(|c| c.name == "QP1Dropped"));
    assert_eq!(&c.to_bytes()[..], &b[..PortCountersExtended::WIRE_LEN]);
    assert!(perf_attrs::has_extended_form("SymbolErrorCounter", all));
    assert!(!perf_attrs::has_extended_form(
        "SymbolErrorCounter",
        PmaCapabilities::new(pma_capability::IS_EXTENDED_WIDTH_SUPPORTED, 0)
    ));
    assert!(perf_attrs::has_extended_form(
        "PortXmitData",
        PmaCapabilities::new(pma_capability::IS_EXTENDED_WIDTH_NO_IETF_SUPPORTED, 0)
    ));
    assert!(!perf_attrs::has_extended_form(
        "PortXmitData",
        PmaCapabilities::NONE
    ));
}

/// PortExtendedSpeedsCounters without RS-FEC, by hand from IB_PESC_*: PortSelect at bit 8,
/// a 64-bit CounterSelect at 64, SyncHeaderErrorCounter at 128, UnknownBlockCounter 144,
/// ErrorDetectionCounterLane0..11 16 bits each from 160, FECCorrectableBlockCtrLane0..11
/// 32 bits each from 352, FECUncorrectableBlockCtrLane0..11 from 736.
#[test]
fn golden_port_extended_speeds_counters() {
    let mut b = [0u8; 192];
    b[1] = 2;
    b[8..16].copy_from_slice(&u64::MAX.to_be_bytes());
    b[16..18].copy_from_slice(&1u16.to_be_bytes()); // SyncHeaderErrorCounter
    b[18..20].copy_from_slice(&2u16.to_be_bytes()); // UnknownBlockCounter
    for lane in 0..12usize {
        let v = lane as u16 + 10;
        b[20 + 2 * lane..22 + 2 * lane].copy_from_slice(&v.to_be_bytes());
        let corrected = 1000 + lane as u32;
        b[44 + 4 * lane..48 + 4 * lane].copy_from_slice(&corrected.to_be_bytes());
        let lost = 2000 + lane as u32;
        b[92 + 4 * lane..96 + 4 * lane].copy_from_slice(&lost.to_be_bytes());
    }
    let c = PortExtendedSpeedsCounters::decode(&b).unwrap();
    assert_eq!((c.port_select, c.counter_select), (2, u64::MAX));
    let v = c.counters();
    let get = |n: &str| v.iter().find(|c| c.name == n).unwrap().value;
    assert_eq!(get("SyncHeaderErrorCounter"), 1);
    assert_eq!(get("UnknownBlockCounter"), 2);
    assert_eq!(get("ErrorDetectionCounterLane0"), 10);
    assert_eq!(get("ErrorDetectionCounterLane11"), 21);
    assert_eq!(get("FECCorrectableBlockCtrLane0"), 1000);
    assert_eq!(get("FECCorrectableBlockCtrLane11"), 1011);
    assert_eq!(get("FECUncorrectableBlockCtrLane0"), 2000);
    assert_eq!(get("FECUncorrectableBlockCtrLane11"), 2011);
    assert_eq!(v.len(), perf_attrs::EXTENDED_SPEEDS_COUNTERS.len());
    assert!(v.iter().all(|c| c.kind == CounterKind::Physical));
    assert_eq!(<PortExtendedSpeedsCounters as Attribute>::ID, 0x1f);
    assert_eq!(
        &c.to_bytes()[..],
        &b[..PortExtendedSpeedsCounters::WIRE_LEN]
    );
    assert!(PortExtendedSpeedsCounters::decode(&b[..139]).is_err());
    // The request: PortSelect in byte 1, CounterSelect 64 bits from byte 8.
    let t = PortExtendedSpeedsCounters::selecting(5, 0xffff);
    assert_eq!(
        &t.to_bytes()[..16],
        &[0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
    );
}

/// The RS-FEC layout, by hand from IB_PESC_RSFEC_*: the sync header and unknown block
/// counters where the other layout has them, FECCorrectableSymbolCtrLane0..11 32 bits each
/// from 352, PortFECCorrectableBlockCtr at 1120, PortFECUncorrectableBlockCtr 1152,
/// PortFECCorrectedSymbolCtr 1184.
#[test]
fn golden_port_extended_speeds_counters_rs_fec() {
    let mut b = [0u8; 192];
    b[1] = 4;
    b[16..18].copy_from_slice(&3u16.to_be_bytes());
    for lane in 0..12usize {
        let v = 500 + lane as u32;
        b[44 + 4 * lane..48 + 4 * lane].copy_from_slice(&v.to_be_bytes());
    }
    b[140..144].copy_from_slice(&77u32.to_be_bytes());
    b[144..148].copy_from_slice(&88u32.to_be_bytes());
    b[148..152].copy_from_slice(&99u32.to_be_bytes());
    let c = PortExtendedSpeedsCountersRsFec::decode(&b).unwrap();
    let got: Vec<(&str, u64)> = c.counters().iter().map(|c| (c.name, c.value)).collect();
    assert_eq!(got[0], ("SyncHeaderErrorCounter", 3));
    assert_eq!(got[2], ("FECCorrectableSymbolCtrLane0", 500));
    assert_eq!(got[13], ("FECCorrectableSymbolCtrLane11", 511));
    assert_eq!(
        got[14..],
        [
            ("PortFECCorrectableBlockCtr", 77),
            ("PortFECUncorrectableBlockCtr", 88),
            ("PortFECCorrectedSymbolCtr", 99)
        ]
    );
    assert_eq!(
        &c.to_bytes()[..],
        &b[..PortExtendedSpeedsCountersRsFec::WIRE_LEN]
    );
    assert!(PortExtendedSpeedsCountersRsFec::decode(&b[..151]).is_err());
}

/// PortInfoExtended by hand from IB_PORT_EXT_*: CapMask (32 bits) at 0, FECModeActive at
/// bit 32, the per-speed supported/enabled masks 16 bits each from 48. The layout choice
/// perfquery makes from it and the PMA's IsRSFECCountersSupported (bit 14).
#[test]
fn golden_port_info_extended_and_the_rs_fec_layout_choice() {
    let mut b = [0u8; 64];
    b[0..4].copy_from_slice(&1u32.to_be_bytes()); // IsFECModeSupported
    b[4..6].copy_from_slice(&2u16.to_be_bytes()); // RS-FEC active
    b[14..16].copy_from_slice(&0x0007u16.to_be_bytes()); // HDRFECModeSupported
    b[16..18].copy_from_slice(&0x0004u16.to_be_bytes()); // HDRFECModeEnabled
    let p = PortInfoExtended::decode(&b).unwrap();
    assert_eq!(p.fec_mode(), FecMode::RsFec);
    assert_eq!((p.hdr_fec_mode_supported, p.hdr_fec_mode_enabled), (7, 4));
    assert!(p.rs_fec_active());
    assert_eq!(<PortInfoExtended as Attribute>::ID, 0x33);
    assert_reencodes(&b, &p.to_bytes());
    let rs_fec_pma = PmaCapabilities::new(pma_capability::IS_RS_FEC_COUNTERS_SUPPORTED, 0);
    assert!(perf_attrs::extended_speeds_rs_fec(rs_fec_pma, Some(&p)));
    assert!(!perf_attrs::extended_speeds_rs_fec(
        PmaCapabilities::NONE,
        Some(&p)
    ));
    assert!(!perf_attrs::extended_speeds_rs_fec(rs_fec_pma, None));
    for (mode, rs) in [(0u16, false), (1, false), (3, false), (4, true)] {
        let q = PortInfoExtended {
            fec_mode_active: mode,
            ..p.clone()
        };
        assert_eq!(q.rs_fec_active(), rs, "mode {mode}");
    }
    let unsupported = PortInfoExtended {
        capability_mask: 0,
        ..p
    };
    assert!(!unsupported.rs_fec_active());
}
