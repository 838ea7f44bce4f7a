//! Property tests over every wire codec: decoding arbitrary bytes never panics, input shorter
//! than the layout is an error, and decode(encode(decode(b))) == decode(b) (encode keeps every
//! named field; reserved bits are the only thing it may drop).

use ibscope_mad::attr::link::SpeedField;
use ibscope_mad::attr::{
    mtu_bytes, ClassPortInfo, LinearForwardingTableBlock, MlnxExtPortInfo, NodeDescription,
    NodeInfo, PortCounters, PortCountersExtended, PortExtendedSpeedsCounters,
    PortExtendedSpeedsCountersRsFec, PortInfo, PortInfoExtended, PortRcvErrorDetails,
    PortXmitDiscardDetails, SmInfo, SwitchInfo,
};
use ibscope_mad::header::MadHeader;
use ibscope_mad::sa::{
    LinkRecord, NodeRecord, PathRecord, PortInfoRecord, RmppHeader, SaFrame, SmInfoRecord,
};
use ibscope_mad::smp::{GmpFrame, MadView, SmpFrame};
use ibscope_mad::umad::UmadHeader;
use proptest::prelude::*;

macro_rules! codec_props {
    ($($module:ident => $ty:ty),* $(,)?) => {$(
        mod $module {
            use super::*;

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(512))]

                /// Any bytes of the full length (and a little trailing garbage) decode, and
                /// the decoded value survives an encode/decode round trip.
                #[test]
                fn round_trip(bytes in proptest::collection::vec(any::<u8>(), <$ty>::WIRE_LEN..<$ty>::WIRE_LEN + 16)) {
                    let first = <$ty>::decode(&bytes).expect("full-length input decodes");
                    let encoded = first.to_bytes();
                    prop_assert_eq!(encoded.len(), <$ty>::WIRE_LEN);
                    let second = <$ty>::decode(&encoded).expect("own encoding decodes");
                    prop_assert_eq!(&second, &first);
                    // Encoding is stable: reserved bits are zeroed once and stay zero.
                    let again = second.to_bytes();
                    prop_assert_eq!(again.as_slice(), encoded.as_slice());
                }

                /// Any length decodes or fails cleanly; shorter than the layout always fails.
                #[test]
                fn any_length_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
                    let result = <$ty>::decode(&bytes);
                    if bytes.len() < <$ty>::WIRE_LEN {
                        prop_assert!(result.is_err());
                    } else {
                        prop_assert!(result.is_ok());
                    }
                }
            }
        }
    )*};
}

codec_props! {
    mad_header => MadHeader,
    node_info => NodeInfo,
    node_description => NodeDescription,
    port_info => PortInfo,
    switch_info => SwitchInfo,
    linear_forwarding_table => LinearForwardingTableBlock,
    sm_info => SmInfo,
    class_port_info => ClassPortInfo,
    port_counters => PortCounters,
    port_counters_extended => PortCountersExtended,
    port_rcv_error_details => PortRcvErrorDetails,
    port_xmit_discard_details => PortXmitDiscardDetails,
    port_extended_speeds_counters => PortExtendedSpeedsCounters,
    port_extended_speeds_counters_rs_fec => PortExtendedSpeedsCountersRsFec,
    mlnx_ext_port_info => MlnxExtPortInfo,
    port_info_extended => PortInfoExtended,
    node_record => NodeRecord,
    port_info_record => PortInfoRecord,
    sm_info_record => SmInfoRecord,
    link_record => LinkRecord,
    path_record => PathRecord,
    smp_frame => SmpFrame,
    gmp_frame => GmpFrame,
    rmpp_header => RmppHeader,
    sa_frame => SaFrame,
    umad_header => UmadHeader,
}

proptest! {
    /// Every accessor of a parsed MAD stays in bounds whatever the bytes.
    #[test]
    fn mad_view_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(v) = MadView::parse(&bytes) {
            let _ = (v.status(), v.dr_hops(), v.m_key(), v.sa_attribute_offset());
            prop_assert_eq!(v.smp_data().len(), 64);
            prop_assert_eq!(v.gmp_data().len(), 192);
            prop_assert_eq!(v.sa_data().len(), 200);
        } else {
            prop_assert!(bytes.len() < 256);
        }
    }

    /// The PortInfo helpers are total, and an active width or speed they report is the
    /// code the port put in the active field.
    #[test]
    fn port_info_helpers_are_total(bytes in proptest::collection::vec(any::<u8>(), 64)) {
        let p = PortInfo::decode(&bytes).unwrap();
        let _ = (p.state(), p.phys_state(), p.widths_enabled().best(), p.speeds_enabled().best());
        let _ = (p.speeds_supported(), p.mtu_active_bytes(), mtu_bytes(p.mtu_cap));
        if let Some(w) = p.width_active() {
            prop_assert_eq!(w.bit(), p.link_width_active);
        }
        if let Some(s) = p.speed_active() {
            let facts = s.facts();
            let field = match facts.field {
                SpeedField::LinkSpeed => p.link_speed_active,
                SpeedField::LinkSpeedExt => p.link_speed_ext_active,
                SpeedField::LinkSpeedExt2 => p.link_speed_ext_active2,
                SpeedField::MellanoxExtended => unreachable!("PortInfo carries no FDR10"),
            };
            prop_assert_eq!(facts.bit, field);
        }
    }

    /// NodeDescription text is lossless for short text without NUL.
    #[test]
    fn node_description_text(text in "[^\u{0}]{0,16}") {
        prop_assume!(text.len() <= 64);
        let d = NodeDescription::from_text(&text);
        prop_assert_eq!(NodeDescription::decode(&d.to_bytes()).unwrap().text(), text);
    }
}
