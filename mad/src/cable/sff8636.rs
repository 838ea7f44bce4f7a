//! SFF-8636 (QSFP+, QSFP28, QSFP56; Rev 2.10a): the lower page (status, latched flags,
//! monitors), upper page 00h (identity, type, compliance, checksums CC_BASE and CC_EXT)
//! and upper page 03h (the module's thresholds). Offsets are the specification's, as
//! ethtool's qsfp.h also lists them.

use super::codes::{
    bit, byte, media_of_technology, upper, upper_bit, Connector, ExtendedCompliance, Identifier,
    MapKind, Media,
};
use super::memory::{HalfAddr, MemoryError, ModuleMemory, ADDR_A0};
use super::model::{
    ascii, oui, units, Alarms, Bounds, Checksum, Diagnostics, Flags, Identity, LaneFlags,
    LaneMonitor, Module, ModuleThresholds, RxPowerKind,
};

crate::wire_struct! {
    /// The lower page, bytes 0-127 (SFF-8636 Table 6-2).
    pub struct Lower (128) {
        pub identifier: u8 = byte(0), 8, "Identifier";
        pub revision: u8 = byte(1), 8, "Revision Compliance";
        /// Upper page 00h only: no page 03h.
        pub flat_mem: bool = bit(2, 2), 1, "Flat_mem";
        pub data_not_ready: bool = bit(2, 0), 1, "Data_Not_Ready";
        /// Bits 7-4 Tx4..Tx1 LOS, 3-0 Rx4..Rx1 LOS (latched).
        pub los: u8 = byte(3), 8, "L-Tx/Rx LOS";
        /// Bits 3-0 Tx4..Tx1 Fault (latched).
        pub tx_fault: u8 = byte(4), 8, "L-Tx Fault";
        /// Bits 7-4 Tx4..Tx1 CDR LOL, 3-0 Rx4..Rx1 CDR LOL (latched).
        pub lol: u8 = byte(5), 8, "L-Tx/Rx CDR LOL";
        /// Bits 7-4: high alarm, low alarm, high warning, low warning.
        pub temperature_flags: u8 = byte(6), 8, "L-Temp Alarm/Warning";
        pub voltage_flags: u8 = byte(7), 8, "L-Vcc Alarm/Warning";
        /// A nibble per lane: lane 1 in byte 9's high nibble, lane 4 in byte 10's low one.
        pub rx_power_flags: [u8; 2] = byte(9), 16, "L-Rx Power Alarm/Warning";
        pub bias_flags: [u8; 2] = byte(11), 16, "L-Tx Bias Alarm/Warning";
        pub tx_power_flags: [u8; 2] = byte(13), 16, "L-Tx Power Alarm/Warning";
        pub temperature: u16 = byte(22), 16, "Temperature";
        pub voltage: u16 = byte(26), 16, "Supply Voltage";
        pub rx_power: [u8; 8] = byte(34), 64, "Rx Power lanes 1-4";
        pub bias: [u8; 8] = byte(42), 64, "Tx Bias lanes 1-4";
        pub tx_power: [u8; 8] = byte(50), 64, "Tx Power lanes 1-4";
        pub page_select: u8 = byte(127), 8, "Page Select";
    }
}

crate::wire_struct! {
    /// Upper page 00h, bytes 128-255 (SFF-8636 Table 6-15).
    pub struct Page00 (128) {
        pub identifier: u8 = upper(128), 8, "Identifier";
        pub ext_identifier: u8 = upper(129), 8, "Extended Identifier";
        pub connector: u8 = upper(130), 8, "Connector";
        /// 10/40G/100G Ethernet compliance; bit 7: see byte 192.
        pub ethernet: u8 = upper(131), 8, "10/40G/100G Ethernet Compliance";
        pub encoding: u8 = upper(139), 8, "Encoding";
        /// Units of 100 Mb/s; 0xFF: see byte 222.
        pub br_nominal: u8 = upper(140), 8, "BR, nominal";
        pub length_smf_km: u8 = upper(142), 8, "Length (SMF)";
        pub length_om3: u8 = upper(143), 8, "Length (OM3 50 um)";
        pub length_om2: u8 = upper(144), 8, "Length (OM2 50 um)";
        pub length_om1: u8 = upper(145), 8, "Length (OM1 62.5 um)";
        /// Metres: the cable assembly's length (copper, AOC), or OM4 in 2 m units.
        pub length_cable: u8 = upper(146), 8, "Length (passive copper or active cable or OM4 50 um)";
        pub technology: u8 = upper(147), 8, "Device technology";
        pub vendor: [u8; 16] = upper(148), 128, "Vendor name";
        /// Bit 5 HDR, 4 EDR, 3 FDR, 2 QDR, 1 DDR, 0 SDR.
        pub infiniband: u8 = upper(164), 8, "Extended Module Codes";
        pub oui: [u8; 3] = upper(165), 24, "Vendor OUI";
        pub part_number: [u8; 16] = upper(168), 128, "Vendor PN";
        pub revision: [u8; 2] = upper(184), 16, "Vendor rev";
        /// Units of 0.05 nm (optics); copper attenuation otherwise.
        pub wavelength: u16 = upper(186), 16, "Wavelength or Copper Cable Attenuation";
        pub cc_base: u8 = upper(191), 8, "CC_BASE";
        pub link_codes: u8 = upper(192), 8, "Link codes";
        pub serial: [u8; 16] = upper(196), 128, "Vendor SN";
        pub date_code: [u8; 8] = upper(212), 64, "Date Code";
        /// 1: received power is average power, 0: OMA.
        pub rx_power_average: bool = upper_bit(220, 3), 1, "Received power measurements type";
        pub tx_power_supported: bool = upper_bit(220, 2), 1, "Transmitter power measurement";
        /// Units of 250 Mb/s, when byte 140 is 0xFF.
        pub br_nominal_250: u8 = upper(222), 8, "Extended Baud Rate: Nominal";
        pub cc_ext: u8 = upper(223), 8, "CC_EXT";
    }
}

crate::wire_struct! {
    /// Upper page 03h, the module's thresholds (SFF-8636 Table 6-22): each monitor's high
    /// alarm, low alarm, high warning and low warning in that order.
    pub struct Page03 (128) {
        pub temperature: [u8; 8] = upper(128), 64, "Temp thresholds";
        pub voltage: [u8; 8] = upper(144), 64, "Vcc thresholds";
        pub rx_power: [u8; 8] = upper(176), 64, "Rx Power thresholds";
        pub bias: [u8; 8] = upper(184), 64, "Tx Bias thresholds";
        pub tx_power: [u8; 8] = upper(192), 64, "Tx Power thresholds";
    }
}

/// InfiniBand rates by their bit in byte 164 (SFF-8636 Table 6-21; HDR is bit 5).
pub const INFINIBAND_BITS: [(u8, &str); 6] = [
    (0, "SDR"),
    (1, "DDR"),
    (2, "QDR"),
    (3, "FDR"),
    (4, "EDR"),
    (5, "HDR"),
];

/// Ethernet compliance bits of byte 131 (SFF-8636 Table 6-17).
const ETHERNET_BITS: [(u8, &str); 7] = [
    (0, "40G Active Cable (XLPPI)"),
    (1, "40GBASE-LR4"),
    (2, "40GBASE-SR4"),
    (3, "40GBASE-CR4"),
    (4, "10GBASE-SR"),
    (5, "10GBASE-LR"),
    (6, "10GBASE-LRM"),
];

/// Decodes an SFF-8636 module: the lower page and page 00h are needed, page 03h is read
/// where the module has it.
pub fn decode(memory: &ModuleMemory) -> Result<Module, MemoryError> {
    let lower_bytes = memory.need(HalfAddr::lower(ADDR_A0))?;
    let page0_bytes = memory.need(HalfAddr::page(ADDR_A0, 0))?;
    let lower = decoded(Lower::decode(lower_bytes))?;
    let page0 = decoded(Page00::decode(page0_bytes))?;
    let thresholds = match memory.half(HalfAddr::page(ADDR_A0, 3)) {
        Some(bytes) if !lower.flat_mem => Some(thresholds(&decoded(Page03::decode(bytes))?)),
        _ => None,
    };
    let extended =
        (page0.ethernet & 0x80 != 0).then(|| ExtendedCompliance::from_code(page0.link_codes));
    let infiniband: Vec<&'static str> = INFINIBAND_BITS
        .iter()
        .filter(|(b, _)| page0.infiniband & (1 << b) != 0)
        .map(|(_, name)| *name)
        .collect();
    let media = media(&page0, extended);
    let mut compliance: Vec<String> = ETHERNET_BITS
        .iter()
        .filter(|(b, _)| page0.ethernet & (1 << b) != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    if let Some(e) = extended.filter(|e| *e != ExtendedCompliance::Unspecified) {
        compliance.push(e.name().to_string());
    }
    compliance.extend(infiniband.iter().map(|r| format!("InfiniBand {r}")));
    let br = match page0.br_nominal {
        0xff => f64::from(page0.br_nominal_250) * 0.25,
        v => f64::from(v) * 0.1,
    };
    Ok(Module {
        map: MapKind::Sff8636,
        identifier: Identifier::from_code(lower.identifier),
        identity: Identity {
            vendor: ascii(&page0.vendor),
            oui: oui(page0.oui),
            part_number: ascii(&page0.part_number),
            revision: ascii(&page0.revision),
            serial: ascii(&page0.serial),
            date_code: ascii(&page0.date_code),
        },
        connector: Connector::from_code(page0.connector),
        media,
        lanes: 4,
        length_m: media.is_cable().then_some(f64::from(page0.length_cable)),
        wavelength_nm: (!media.is_cable() && media != Media::Unknown)
            .then_some(f64::from(page0.wavelength) / 20.0),
        max_lane_gbps: crate::cable::rates::max_lane_gbps(&infiniband, extended, br),
        compliance,
        extended_compliance: extended,
        infiniband,
        diagnostics: Some(diagnostics(&lower, &page0)),
        thresholds,
        flags: flags(&lower),
        cmis: None,
        checksums: vec![
            Checksum::over("CC_BASE", "128-190", &page0_bytes[..63], page0.cc_base),
            Checksum::over("CC_EXT", "192-222", &page0_bytes[64..95], page0.cc_ext),
        ],
    })
}

fn decoded<T>(r: Result<T, crate::DecodeError>) -> Result<T, MemoryError> {
    // Every table here is 128 bytes and every half is 128 bytes: a decode cannot fail.
    r.map_err(|_| MemoryError::Empty)
}

/// What carries the signal: the transmitter technology says copper; the compliance codes
/// say an active optical cable; otherwise the wavelength tells multi-mode from single-mode.
fn media(page0: &Page00, extended: Option<ExtendedCompliance>) -> Media {
    use ExtendedCompliance::*;
    if let Some(copper) = media_of_technology(page0.technology >> 4) {
        return copper;
    }
    match extended {
        Some(Aoc100G | Aoc100G12 | Aoc200G | Aoc200G12) => return Media::ActiveOptical,
        Some(Acc100G | Acc100G12 | Acc200G | Acc200G12) => return Media::ActiveCopper,
        _ => {}
    }
    if page0.ethernet & 0x01 != 0 {
        return Media::ActiveOptical;
    }
    match page0.wavelength / 20 {
        800..=950 => Media::MultiModeFibre,
        1200..=1650 => Media::SingleModeFibre,
        _ => Media::Unknown,
    }
}

fn diagnostics(lower: &Lower, page0: &Page00) -> Diagnostics {
    let rx = units::words(&lower.rx_power);
    let bias = units::words(&lower.bias);
    let tx = units::words(&lower.tx_power);
    Diagnostics {
        temperature_c: Some(units::temperature_c(lower.temperature)),
        voltage_v: Some(units::voltage_v(lower.voltage)),
        rx_power_kind: if page0.rx_power_average {
            RxPowerKind::Average
        } else {
            RxPowerKind::Oma
        },
        lanes: (0..4)
            .map(|i| LaneMonitor {
                lane: i as u8 + 1,
                bias_ma: Some(units::bias_ma(bias[i])),
                tx_power_mw: page0.tx_power_supported.then(|| units::power_mw(tx[i])),
                rx_power_mw: Some(units::power_mw(rx[i])),
            })
            .collect(),
    }
}

/// A lane's nibble in a pair of flag bytes: lane 1 is byte 0's high nibble.
fn lane_nibble(pair: [u8; 2], lane: usize) -> u8 {
    let b = pair[lane / 2];
    if lane % 2 == 0 {
        b >> 4
    } else {
        b & 0x0f
    }
}

fn flags(lower: &Lower) -> Flags {
    Flags {
        latched: true,
        temperature: Some(Alarms::from_nibble(lower.temperature_flags >> 4)),
        voltage: Some(Alarms::from_nibble(lower.voltage_flags >> 4)),
        lanes: (0..4usize)
            .map(|i| LaneFlags {
                lane: i as u8 + 1,
                rx_los: Some(lower.los & (1 << i) != 0),
                tx_los: Some(lower.los & (1 << (i + 4)) != 0),
                rx_lol: Some(lower.lol & (1 << i) != 0),
                tx_lol: Some(lower.lol & (1 << (i + 4)) != 0),
                tx_fault: Some(lower.tx_fault & (1 << i) != 0),
                rx_power: Some(Alarms::from_nibble(lane_nibble(lower.rx_power_flags, i))),
                tx_power: Some(Alarms::from_nibble(lane_nibble(lower.tx_power_flags, i))),
                bias: Some(Alarms::from_nibble(lane_nibble(lower.bias_flags, i))),
            })
            .collect(),
    }
}

/// Four thresholds (high alarm, low alarm, high warning, low warning) in a monitor's unit.
pub fn bounds(bytes: &[u8], unit: impl Fn(u16) -> f64) -> Bounds {
    let w = units::words(bytes);
    let at = |i: usize| unit(w.get(i).copied().unwrap_or(0));
    Bounds {
        high_alarm: at(0),
        low_alarm: at(1),
        high_warning: at(2),
        low_warning: at(3),
    }
}

fn thresholds(page3: &Page03) -> ModuleThresholds {
    ModuleThresholds {
        temperature_c: bounds(&page3.temperature, units::temperature_c),
        voltage_v: bounds(&page3.voltage, units::voltage_v),
        bias_ma: bounds(&page3.bias, units::bias_ma),
        tx_power_mw: bounds(&page3.tx_power, units::power_mw),
        rx_power_mw: bounds(&page3.rx_power, units::power_mw),
    }
}
