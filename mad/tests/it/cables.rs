//! Module memory maps decoded from published captures (tests/data/cables, SOURCES.md):
//! each field compared with what the publishing tool printed for the same module.

use ibscope_mad::cable::{self, dump, Connector, HalfAddr, Identifier, MapKind, Media, ADDR_A0};

fn capture(name: &str) -> Vec<u8> {
    let path = format!("{}/../tests/data/cables/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn sonic_sfputil_sff8472_finisar_sfp() {
    let dump = dump::parse(&capture("sonic-sfputil-sff8472-finisar-ftlx8571d3bcl.txt")).unwrap();
    assert_eq!(dump.format, dump::DumpFormat::Sfputil);
    let m = cable::decode(&dump.memory).unwrap();
    assert_eq!(m.map, MapKind::Sff8472);
    assert_eq!(m.identifier, Identifier::Sfp);
    // sfputil's ASCII column: "....FINISAR CORP" / ".   ...eFTLX8571" / "D3BCL   A   .R.H"
    // / "....AUJ0RCJ     " / "    151029  h...".
    assert_eq!(m.identity.vendor, "FINISAR CORP.");
    assert_eq!(m.identity.oui, "00:90:65");
    assert_eq!(m.identity.part_number, "FTLX8571D3BCL");
    assert_eq!(m.identity.revision, "A");
    assert_eq!(m.identity.serial, "AUJ0RCJ");
    assert_eq!(m.identity.date_code, "151029");
    assert_eq!(m.connector, Connector::Lc);
    // Bytes 60-61 are 0x0352: 850 nm, a multi-mode SR optic; byte 3 bit 4 is 10GBASE-SR.
    assert_eq!(m.wavelength_nm, Some(850.0));
    assert_eq!(m.media, Media::MultiModeFibre);
    assert!(m.compliance.iter().any(|c| c == "10GBASE-SR"));
    // A real module: CC_BASE (0x48), CC_EXT (0xf6) and CC_DMI (0x1b) all hold.
    assert_eq!(m.checksums.len(), 3);
    assert!(m.checksums_ok(), "{:?}", m.checksums);
    // A2h bytes 96-105 by SFF-8472 Table 9-11's units: 0x1402 is 20.0078 °C, 0x81b1
    // 3.3201 V, 0x0d5a 6.836 mA, 0x17a5 0.6053 mW, 0x1587 0.5511 mW.
    let d = m.diagnostics.as_ref().unwrap();
    assert!((d.temperature_c.unwrap() - 20.0078).abs() < 1e-3);
    assert!((d.voltage_v.unwrap() - 3.3201).abs() < 1e-4);
    let lane = &d.lanes[0];
    assert!((lane.bias_ma.unwrap() - 6.836).abs() < 1e-3);
    assert!((lane.tx_power_mw.unwrap() - 0.6053).abs() < 1e-4);
    assert!((lane.rx_power_mw.unwrap() - 0.5511).abs() < 1e-4);
    // Thresholds: temperature high alarm 0x4e00 is 78 °C, Rx power low alarm 0x0064
    // is 0.01 mW.
    let t = m.thresholds.as_ref().unwrap();
    assert_eq!(t.temperature_c.high_alarm, 78.0);
    assert!((t.rx_power_mw.low_alarm - 0.01).abs() < 1e-9);
    // Byte 110 is 0x30: no Tx fault, no LOS; no alarm or warning flag is set.
    let f = &m.flags.lanes[0];
    assert_eq!((f.rx_los, f.tx_fault), (Some(false), Some(false)));
    assert!(!f.rx_power.unwrap().any());
    assert!(!m.flags.latched);
}

#[test]
fn sonic_sfputil_sff8636_molex_passive_dac() {
    let dump = dump::parse(&capture("sonic-sfputil-sff8636-molex-1110401054.txt")).unwrap();
    let m = cable::decode(&dump.memory).unwrap();
    assert_eq!(m.map, MapKind::Sff8636);
    assert_eq!(m.identifier, Identifier::QsfpPlus);
    // sfputil's ASCII column: "....Molex Inc.  " / "    ...:11104010" / "54        ....F."
    // / "....611030929   " / "    160419  ...$".
    assert_eq!(m.identity.vendor, "Molex Inc.");
    assert_eq!(m.identity.oui, "00:09:3a");
    assert_eq!(m.identity.part_number, "1110401054");
    assert_eq!(m.identity.serial, "611030929");
    assert_eq!(m.identity.date_code, "160419");
    // Byte 130 0x23: no separable connector; byte 147 0xa0: copper, unequalized.
    assert_eq!(m.connector, Connector::NoSeparable);
    assert_eq!(m.media, Media::PassiveCopper);
    assert_eq!(m.length_m, Some(1.0));
    // Byte 131 bit 3: 40GBASE-CR4; byte 164 0x07: InfiniBand SDR, DDR, QDR.
    assert!(m.compliance.iter().any(|c| c == "40GBASE-CR4"));
    assert_eq!(m.infiniband, ["SDR", "DDR", "QDR"]);
    assert_eq!(m.max_lane_gbps, Some(10.0));
    assert!(m.checksums_ok(), "{:?}", m.checksums);
    // Flat memory (byte 2 bit 2): no page 03h, so no thresholds.
    assert!(m.thresholds.is_none());
}

#[test]
fn ice_driver_short_read_is_named_not_guessed() {
    // The ice driver before its fix returned the lower page alone, mostly zero: ethtool
    // printed it as hex because it could not decode it. So must ibscope refuse it.
    let dump = dump::parse(&capture("ice-unpatched-qsfp28-lower-page.txt")).unwrap();
    assert_eq!(dump.memory.identifier().unwrap(), Identifier::Qsfp28);
    assert!(dump.memory.half(HalfAddr::page(ADDR_A0, 0)).is_none());
    let err = cable::decode(&dump.memory).unwrap_err();
    assert_eq!(err.to_string(), "A0h page 00h was not read");
}

#[test]
fn a_wrong_page_fails_its_checksum() {
    // Page 00h of the Molex cable with one byte of its serial changed, as a driver that
    // reads another page or a corrupt read returns it: CC_EXT no longer holds.
    let dump = dump::parse(&capture("sonic-sfputil-sff8636-molex-1110401054.txt")).unwrap();
    let mut memory = dump.memory.clone();
    let mut page0 = *memory.half(HalfAddr::page(ADDR_A0, 0)).unwrap();
    page0[196 - 128] ^= 0x01;
    memory.insert(HalfAddr::page(ADDR_A0, 0), page0);
    let m = cable::decode(&memory).unwrap();
    let failed: Vec<&str> = m
        .checksums
        .iter()
        .filter(|c| !c.ok())
        .map(|c| c.name)
        .collect();
    assert_eq!(failed, ["CC_EXT"]);
}

proptest::proptest! {
    /// Any bytes at all: a dump parses or is refused, and any memory decodes or is
    /// refused, never a panic.
    #[test]
    fn untrusted_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..800)) {
        if let Ok(d) = dump::parse(&bytes) {
            let _ = cable::decode(&d.memory);
        }
        let mut ids = bytes.clone();
        for id in [0x03u8, 0x11, 0x18] {
            if let Some(first) = ids.first_mut() {
                *first = id;
            }
            let len = ids.len() / 128 * 128;
            if let Ok(m) = cable::ModuleMemory::from_raw(&ids[..len]) {
                let _ = cable::decode(&m);
            }
        }
    }
}

/// A CMIS module with banks 0 and 1 (page 01h byte 142 = 01b): 16 lanes, lanes 9-16 from
/// page 11h of bank 1 at the same offsets as lanes 1-8 in bank 0 (CMIS 5.2 Table 8-83:
/// OpticalPowerRx1-8 at bytes 186-201).
#[test]
fn cmis_lanes_past_8_come_from_bank_1() {
    use ibscope_mad::cable::decode::bank_halves;
    use ibscope_mad::cable::{HalfAddr, ModuleMemory, HALF};
    let mut m = ModuleMemory::new();
    let mut lower = [0u8; HALF];
    lower[0] = 0x19; // OSFP
    lower[1] = 0x52; // CMIS 5.2
    lower[85] = 0x02; // single-mode fibre
    m.insert(HalfAddr::lower(ADDR_A0), lower);
    m.insert(HalfAddr::page(ADDR_A0, 0), [0x20; HALF]);
    let mut page1 = [0u8; HALF];
    page1[142 - 128] = 0x01;
    page1[158 - 128] = 0x02; // Rx LOS flags implemented
    m.insert(HalfAddr::page(ADDR_A0, 1), page1);
    let bank1 = HalfAddr {
        bank: 1,
        ..HalfAddr::page(ADDR_A0, 0x11)
    };
    assert_eq!(bank_halves(&m), [bank1]);
    let mut page11 = [0u8; HALF];
    // Lane 2 of the bank (lane 10 of the module): 0x2710 tenths of a uW is 1 mW; Rx LOS.
    page11[188 - 128..190 - 128].copy_from_slice(&[0x27, 0x10]);
    page11[147 - 128] = 0x02;
    m.insert(HalfAddr::page(ADDR_A0, 0x11), [0u8; HALF]);
    m.insert(bank1, page11);
    let module = cable::decode(&m).unwrap();
    assert_eq!(module.lanes, 16);
    let d = module.diagnostics.unwrap();
    assert_eq!(d.lanes.len(), 16);
    assert_eq!(d.lanes[9].lane, 10);
    assert_eq!(d.lanes[9].rx_power_mw, Some(1.0));
    assert_eq!(d.lanes[1].rx_power_mw, Some(0.0));
    assert_eq!(module.flags.lanes[9].rx_los, Some(true));
    assert_eq!(module.flags.lanes[1].rx_los, Some(false));
}

/// A CMIS module's rate comes from its applications' host interfaces (SFF-8024 Table 4-5:
/// 0x11 400GAUI-8, 0x31 IB HDR, 0x32 IB NDR; 0xFF ends the list).
#[test]
fn cmis_rates_come_from_the_applications_host_interfaces() {
    use ibscope_mad::cable::{HalfAddr, HostInterface, ModuleMemory, HALF};
    let decode = |apps: &[u8]| {
        let mut m = ModuleMemory::new();
        let mut lower = [0u8; HALF];
        lower[0] = 0x18;
        lower[86..86 + apps.len()].copy_from_slice(apps);
        m.insert(HalfAddr::lower(ADDR_A0), lower);
        m.insert(HalfAddr::page(ADDR_A0, 0), [0x20; HALF]);
        cable::decode(&m).unwrap()
    };
    let ndr = decode(&[
        0x11, 0x1d, 0x88, 0x01, 0x32, 0x1d, 0x44, 0x01, 0xff, 0, 0, 0,
    ]);
    assert_eq!(ndr.max_lane_gbps, Some(106.25));
    assert_eq!(
        ndr.compliance,
        [HostInterface::Aui400G8.name(), HostInterface::IbNdr.name()]
    );
    let hdr = decode(&[0x31, 0x1d, 0x44, 0x01, 0xff]);
    assert_eq!(hdr.max_lane_gbps, Some(53.125));
    // An unknown or missing host interface gives no rate (never a guessed one).
    assert_eq!(decode(&[0xfe, 0, 0, 0, 0xff]).max_lane_gbps, None);
    assert_eq!(decode(&[0xff]).max_lane_gbps, None);
}

/// The MikroTik S+AO0005 the netdev thread on amd-xgbe's active cable handling posted, as
/// `ethtool -m` decoded it and as hex: each field against ethtool's own line.
#[test]
fn netdev_mikrotik_sfp_active_cable_against_ethtools_decoding() {
    let dump = dump::parse(&capture("netdev-mikrotik-s-ao0005-sfp-aoc.txt")).unwrap();
    assert_eq!(dump.format, dump::DumpFormat::EthtoolHex);
    let m = cable::decode(&dump.memory).unwrap();
    // "Identifier : 0x03 (SFP)"
    assert_eq!(m.identifier, Identifier::Sfp);
    // "Connector : 0x21 (Copper pigtail)"
    assert_eq!(m.connector, Connector::CopperPigtail);
    // "Transceiver type : Active Cable" (byte 8 bit 3), with its copper pigtail.
    assert_eq!(m.media, Media::ActiveCopper);
    // "Length (Copper) : 5m"
    assert_eq!(m.length_m, Some(5.0));
    // "BR, Nominal : 10300MBd"
    assert_eq!(m.max_lane_gbps, Some(10.3));
    // "Vendor name : MikroTik", "Vendor OUI : 00:00:00", "Vendor PN : S+AO0005",
    // "Vendor rev : 1.0", "Vendor SN : STST050B1900001", "Date code : 210515"
    assert_eq!(m.identity.vendor, "MikroTik");
    assert_eq!(m.identity.oui, "00:00:00");
    assert_eq!(m.identity.part_number, "S+AO0005");
    assert_eq!(m.identity.revision, "1.0");
    assert_eq!(m.identity.serial, "STST050B1900001");
    assert_eq!(m.identity.date_code, "210515");
    // ethtool printed no diagnostics: byte 92 is 0x00, none implemented, so the A2h bytes
    // the driver returned (thresholds among them) are not read as live values.
    assert!(m.diagnostics.is_none(), "{:?}", m.diagnostics);
    assert!(m.thresholds.is_none());
    // CC_BASE (0x5a) and CC_EXT (0x25) hold.
    assert!(m.checksums_ok(), "{:?}", m.checksums);
}

/// mlx5's module read that failed and was returned as data (the upstream fix's commit
/// message, d1c94bc5b90c): the bytes are a netlink message, identifier 0x00. Refused, never
/// read as a module.
#[test]
fn a_failed_read_returned_as_data_is_refused() {
    let err = dump::parse(&capture("mlx5-failed-module-read-returned-as-data.txt"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("identifier 0x00"), "{err}");
}
