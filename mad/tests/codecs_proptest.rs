//! Property tests over every wire codec: decoding arbitrary bytes never panics, and
//! decode(encode(decode(b))) == decode(b) (encode keeps every named field; reserved bits
//! are the only thing it may drop).

use ibscope_mad::attr::*;
use ibscope_mad::header::MadHeader;
use ibscope_mad::smp::MadView;
use proptest::prelude::*;

macro_rules! round_trip {
    ($name:ident, $ty:ty) => {
        proptest! {
            #[test]
            fn $name(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
                match <$ty>::decode(&bytes) {
                    Ok(first) => {
                        let again = <$ty>::decode(&first.to_bytes()).expect("re-decode");
                        prop_assert_eq!(again, first);
                    }
                    Err(_) => prop_assert!(bytes.len() < <$ty>::WIRE_LEN),
                }
            }
        }
    };
}

round_trip!(header_round_trip, MadHeader);
round_trip!(node_info_round_trip, NodeInfo);
round_trip!(node_description_round_trip, NodeDescription);
round_trip!(port_info_round_trip, PortInfo);
round_trip!(switch_info_round_trip, SwitchInfo);
round_trip!(lft_round_trip, LinearForwardingTableBlock);
round_trip!(sm_info_round_trip, SmInfo);
round_trip!(class_port_info_round_trip, ClassPortInfo);
round_trip!(port_counters_round_trip, PortCounters);
round_trip!(port_counters_extended_round_trip, PortCountersExtended);

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

    /// Derived PortInfo facts never panic on any field values.
    #[test]
    fn port_info_accessors_total(bytes in proptest::collection::vec(any::<u8>(), 64)) {
        let p = PortInfo::decode(&bytes).unwrap();
        let _ = (p.width_active(), p.speed_active(), p.state(), p.phys_state());
        let _ = (p.widths_enabled().best(), p.speeds_enabled().best(), mtu_bytes(p.mtu_cap));
    }
}
