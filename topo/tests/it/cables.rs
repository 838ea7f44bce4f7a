//! The cable findings on published module captures (tests/data/cables/SOURCES.md): silent
//! on the healthy ones, firing where a capture is changed the way a failing module is.

use ibscope_mad::attr::link::Speed;
use ibscope_mad::cable::{self, dump, HalfAddr, Module, ModuleMemory, ADDR_A0, ADDR_A2};
use ibscope_topo::cables::{module_findings, ModuleContext};
use ibscope_topo::findings::FindingKind;

fn memory(name: &str) -> ModuleMemory {
    let path = format!("{}/../tests/data/cables/{name}", env!("CARGO_MANIFEST_DIR"));
    dump::parse(&std::fs::read(path).unwrap()).unwrap().memory
}

fn kinds(m: &Module, ctx: &ModuleContext) -> Vec<FindingKind> {
    module_findings(m, ctx).iter().map(|f| f.kind).collect()
}

const SFP: &str = "sonic-sfputil-sff8472-finisar-ftlx8571d3bcl.txt";
const DAC: &str = "sonic-sfputil-sff8636-molex-1110401054.txt";
const AOC: &str = "netdev-mikrotik-s-ao0005-sfp-aoc.txt";

#[test]
fn healthy_captures_raise_nothing() {
    for name in [SFP, DAC, AOC] {
        let m = cable::decode(&memory(name)).unwrap();
        assert_eq!(kinds(&m, &ModuleContext::default()), [], "{name}");
    }
}

/// The SFP with its A2h live bytes changed: `at` (an A2h byte offset) set to `bytes`, and
/// CC_DMI left as it is (it covers only bytes 0-94, the thresholds and calibration).
fn sfp_with(at: usize, bytes: &[u8]) -> Module {
    let mut m = memory(SFP);
    let mut a2 = *m.half(HalfAddr::lower(ADDR_A2)).unwrap();
    a2[at..at + bytes.len()].copy_from_slice(bytes);
    m.insert(HalfAddr::lower(ADDR_A2), a2);
    cable::decode(&m).unwrap()
}

#[test]
fn a_dark_receiver_is_named_with_the_serial() {
    // Rx power 0x0000 (no light) and the Rx LOS state bit of byte 110 set.
    let m = sfp_with(104, &[0, 0]);
    let found = module_findings(&m, &ModuleContext::default());
    let rx = found
        .iter()
        .find(|f| f.kind == FindingKind::CableRxPowerLow)
        .expect("rx power low");
    // The module's own low alarm threshold is 0x0064, 0.01 mW (-20 dBm).
    assert!(rx.message.contains("SN AUJ0RCJ"), "{}", rx.message);
    assert!(rx.message.contains("lane 1"), "{}", rx.message);
    assert!(
        rx.message.contains("low alarm threshold 0.0100 mW"),
        "{}",
        rx.message
    );
    let m = sfp_with(110, &[0x30 | 0x02]);
    assert_eq!(
        kinds(&m, &ModuleContext::default()),
        [FindingKind::CableLos]
    );
    let m = sfp_with(110, &[0x30 | 0x04]);
    assert_eq!(
        kinds(&m, &ModuleContext::default()),
        [FindingKind::CableTxFault]
    );
}

#[test]
fn hot_modules_against_their_own_threshold() {
    // 0x4b00 is 75 °C: above the module's high warning (A2h bytes 4-5, 0x4900: 73 °C),
    // below its high alarm (bytes 0-1, 0x4e00: 78 °C).
    let m = sfp_with(96, &[0x4b, 0x00]);
    let found = module_findings(&m, &ModuleContext::default());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, FindingKind::CableTemperature);
    assert!(
        found[0].message.contains("high warning threshold 73.0"),
        "{}",
        found[0].message
    );
}

#[test]
fn passive_copper_reports_are_not_judged() {
    // The Molex DAC with every lane's Rx LOS and LOL bits set, as passive copper reports
    // them while its link is Active: no finding.
    let mut m = memory(DAC);
    let mut lower = *m.half(HalfAddr::lower(ADDR_A0)).unwrap();
    lower[3] = 0x0f;
    lower[5] = 0x0f;
    m.insert(HalfAddr::lower(ADDR_A0), lower);
    let module = cable::decode(&m).unwrap();
    assert_eq!(kinds(&module, &ModuleContext::default()), []);
}

#[test]
fn a_qdr_cable_on_an_edr_link() {
    // The Molex DAC declares InfiniBand SDR, DDR and QDR (byte 164 = 0x07).
    let m = cable::decode(&memory(DAC)).unwrap();
    let on = |speed| ModuleContext {
        link_speed: Some(speed),
        ..ModuleContext::default()
    };
    assert_eq!(kinds(&m, &on(Speed::Qdr)), []);
    assert_eq!(kinds(&m, &on(Speed::Edr)), [FindingKind::CableRateMismatch]);
}

#[test]
fn a_failed_checksum_stands_alone() {
    let mut m = memory(DAC);
    let mut page0 = *m.half(HalfAddr::page(ADDR_A0, 0)).unwrap();
    page0[147 - 128] = 0x00; // the technology nibble no longer says copper
    m.insert(HalfAddr::page(ADDR_A0, 0), page0);
    let mut lower = *m.half(HalfAddr::lower(ADDR_A0)).unwrap();
    lower[3] = 0x0f;
    m.insert(HalfAddr::lower(ADDR_A0), lower);
    let module = cable::decode(&m).unwrap();
    assert_eq!(
        kinds(&module, &ModuleContext::default()),
        [FindingKind::CableChecksum]
    );
}

#[test]
fn a_split_module_judges_only_the_ports_own_lanes() {
    // The SFP with no light received on its one lane: the port that uses lane 1 has the
    // finding; a port given only other lanes of the module does not.
    let m = sfp_with(104, &[0, 0]);
    let on = |lanes: Vec<u8>| ModuleContext {
        lanes,
        ..ModuleContext::default()
    };
    assert_eq!(kinds(&m, &on(vec![1])), [FindingKind::CableRxPowerLow]);
    assert_eq!(kinds(&m, &on(vec![2, 3])), []);
}

#[test]
fn rates_between_two_reads_of_one_module() {
    use ibscope_topo::cable_rates::rates;
    let before = cable::decode(&memory(SFP)).unwrap();
    // A minute later: 2 °C warmer (A2h temperature 0x1402 -> 0x1602, 1/256 °C units),
    // half the light received (Rx power 0x1587 -> 0x0ac3: 5511 -> 2755 tenths of a uW),
    // and the Rx LOS state raised (byte 110 bit 1).
    let mut m = memory(SFP);
    let mut a2 = *m.half(HalfAddr::lower(ADDR_A2)).unwrap();
    a2[96] = 0x16;
    a2[104..106].copy_from_slice(&[0x0a, 0xc3]);
    a2[110] |= 0x02;
    m.insert(HalfAddr::lower(ADDR_A2), a2);
    let after = cable::decode(&m).unwrap();
    let r = rates(&before, &after, 60.0).unwrap();
    assert_eq!(r.temperature_c_per_min, Some(2.0));
    let rx = r.lanes[0].rx_power_db_per_min.unwrap();
    assert!(
        (rx - 10.0 * (2755.0f64 / 5511.0).log10()).abs() < 1e-9,
        "{rx}"
    );
    assert_eq!(r.lanes[0].tx_power_db_per_min, Some(0.0));
    assert_eq!(r.flags_raised, ["lane 1 rx_los"]);
    // Over two minutes the same change is half the rate.
    assert_eq!(
        rates(&before, &after, 120.0).unwrap().temperature_c_per_min,
        Some(1.0)
    );
    // A lane gone dark has no rate in dB; another module (swapped in) has no rates.
    a2[104..106].copy_from_slice(&[0, 0]);
    m.insert(HalfAddr::lower(ADDR_A2), a2);
    let dark = cable::decode(&m).unwrap();
    assert_eq!(
        rates(&before, &dark, 60.0).unwrap().lanes[0].rx_power_db_per_min,
        None
    );
    let other = cable::decode(&memory(DAC)).unwrap();
    assert!(rates(&before, &other, 60.0).is_none());
}
