//! SFF-8472 (SFP, SFP+, SFP28; Rev 12.4): A0h (identity, type, CC_BASE and CC_EXT) and
//! A2h (thresholds, calibration, live values, alarm and warning flags, CC_DMI). Offsets
//! are the specification's (Tables 4-1 and 9-5), as ethtool's sfpid.c and sfpdiag.c read
//! them.

use super::codes::{bit, byte, Connector, ExtendedCompliance, Identifier, MapKind, Media};
use super::memory::{HalfAddr, MemoryError, ModuleMemory, ADDR_A0, ADDR_A2};
use super::model::{
    ascii, oui, units, Alarms, Bounds, Checksum, Diagnostics, Flags, Identity, LaneFlags,
    LaneMonitor, Module, ModuleThresholds, RxPowerKind,
};

crate::wire_struct! {
    /// A0h bytes 0-127: the serial ID (SFF-8472 Table 4-1).
    pub struct A0 (128) {
        pub identifier: u8 = byte(0), 8, "Identifier";
        pub connector: u8 = byte(2), 8, "Connector";
        /// Byte 3: 10G Ethernet compliance (bit 4 10GBASE-SR, 5 LR, 6 LRM, 7 ER).
        pub ethernet_10g: u8 = byte(3), 8, "10G Ethernet Compliance Codes";
        /// Byte 8 bit 3: active cable, bit 2: passive cable (SFP+ cable technology).
        pub active_cable: bool = bit(8, 3), 1, "Active Cable";
        pub passive_cable: bool = bit(8, 2), 1, "Passive Cable";
        /// Units of 100 MBd; 0xFF: see byte 66.
        pub br_nominal: u8 = byte(12), 8, "BR, Nominal";
        /// Metres of copper or active cable, or OM4 in 10 m units.
        pub length_cable: u8 = byte(18), 8, "Length (OM4 or copper cable)";
        pub vendor: [u8; 16] = byte(20), 128, "Vendor name";
        pub extended: u8 = byte(36), 8, "Transceiver (extended compliance)";
        pub oui: [u8; 3] = byte(37), 24, "Vendor OUI";
        pub part_number: [u8; 16] = byte(40), 128, "Vendor PN";
        pub revision: [u8; 4] = byte(56), 32, "Vendor rev";
        /// Nanometres (optics); cable compliance otherwise.
        pub wavelength: u16 = byte(60), 16, "Wavelength";
        pub cc_base: u8 = byte(63), 8, "CC_BASE";
        pub tx_fault_implemented: bool = bit(65, 3), 1, "TX_FAULT implemented";
        pub rx_los_implemented: bool = bit(65, 1), 1, "RX_LOS implemented";
        /// Units of 250 MBd, when byte 12 is 0xFF.
        pub br_max: u8 = byte(66), 8, "BR, max";
        pub serial: [u8; 16] = byte(68), 128, "Vendor SN";
        pub date_code: [u8; 8] = byte(84), 64, "Date code";
        pub ddm_implemented: bool = bit(92, 6), 1, "Digital diagnostic monitoring implemented";
        pub internally_calibrated: bool = bit(92, 5), 1, "Internally calibrated";
        pub externally_calibrated: bool = bit(92, 4), 1, "Externally calibrated";
        /// 1: average power, 0: OMA.
        pub rx_power_average: bool = bit(92, 3), 1, "Received power measurement type";
        pub alarm_flags_implemented: bool = bit(93, 7), 1, "Alarm/warning flags implemented";
        pub cc_ext: u8 = byte(95), 8, "CC_EXT";
    }
}

crate::wire_struct! {
    /// A2h bytes 0-127: thresholds, calibration and live values (SFF-8472 Table 9-5).
    /// Each threshold block is high alarm, low alarm, high warning, low warning.
    pub struct A2 (128) {
        pub temperature_thresholds: [u8; 8] = byte(0), 64, "Temp thresholds";
        pub voltage_thresholds: [u8; 8] = byte(8), 64, "Voltage thresholds";
        pub bias_thresholds: [u8; 8] = byte(16), 64, "Bias thresholds";
        pub tx_power_thresholds: [u8; 8] = byte(24), 64, "TX Power thresholds";
        pub rx_power_thresholds: [u8; 8] = byte(32), 64, "RX Power thresholds";
        /// Rx_PWR(4) .. Rx_PWR(0): IEEE 754 single precision each.
        pub rx_power_calibration: [u8; 20] = byte(56), 160, "Rx_PWR(4-0)";
        pub bias_slope: u16 = byte(76), 16, "Tx_I(Slope)";
        pub bias_offset: u16 = byte(78), 16, "Tx_I(Offset)";
        pub tx_power_slope: u16 = byte(80), 16, "Tx_PWR(Slope)";
        pub tx_power_offset: u16 = byte(82), 16, "Tx_PWR(Offset)";
        pub temperature_slope: u16 = byte(84), 16, "T(Slope)";
        pub temperature_offset: u16 = byte(86), 16, "T(Offset)";
        pub voltage_slope: u16 = byte(88), 16, "V(Slope)";
        pub voltage_offset: u16 = byte(90), 16, "V(Offset)";
        pub cc_dmi: u8 = byte(95), 8, "CC_DMI";
        pub temperature: u16 = byte(96), 16, "Temperature";
        pub voltage: u16 = byte(98), 16, "Vcc";
        pub bias: u16 = byte(100), 16, "TX Bias";
        pub tx_power: u16 = byte(102), 16, "TX Power";
        pub rx_power: u16 = byte(104), 16, "RX Power";
        pub tx_fault: bool = bit(110, 2), 1, "TX Fault State";
        pub rx_los: bool = bit(110, 1), 1, "Rx_LOS State";
        /// Byte 112: temp high/low alarm (bits 7, 6), Vcc (5, 4), bias (3, 2), TX power
        /// (1, 0); byte 113 bits 7-6: RX power high, low alarm.
        pub alarms: [u8; 2] = byte(112), 16, "Alarm flags";
        pub warnings: [u8; 2] = byte(116), 16, "Warning flags";
    }
}

/// Decodes an SFF-8472 module: A0h is needed, A2h is read where the module implements
/// diagnostics.
pub fn decode(memory: &ModuleMemory) -> Result<Module, MemoryError> {
    let a0_bytes = memory.need(HalfAddr::lower(ADDR_A0))?;
    let a0 = A0::decode(a0_bytes).map_err(|_| MemoryError::Empty)?;
    let extended = Some(ExtendedCompliance::from_code(a0.extended));
    let media = media(&a0);
    let mut checksums = vec![
        Checksum::over("CC_BASE", "0-62", &a0_bytes[..63], a0.cc_base),
        Checksum::over("CC_EXT", "64-94", &a0_bytes[64..95], a0.cc_ext),
    ];
    let a2 = match memory.half(HalfAddr::lower(ADDR_A2)) {
        Some(bytes) if a0.ddm_implemented => {
            let a2 = A2::decode(bytes).map_err(|_| MemoryError::Empty)?;
            checksums.push(Checksum::over(
                "CC_DMI",
                "A2h 0-94",
                &bytes[..95],
                a2.cc_dmi,
            ));
            Some(a2)
        }
        _ => None,
    };
    let br = match a0.br_nominal {
        0xff => f64::from(a0.br_max) * 0.25,
        v => f64::from(v) * 0.1,
    };
    let mut compliance = Vec::new();
    for (b, name) in [
        (4, "10GBASE-SR"),
        (5, "10GBASE-LR"),
        (6, "10GBASE-LRM"),
        (7, "10GBASE-ER"),
    ] {
        if a0.ethernet_10g & (1 << b) != 0 {
            compliance.push(name.to_string());
        }
    }
    if let Some(e) = extended.filter(|e| *e != ExtendedCompliance::Unspecified) {
        compliance.push(e.name().to_string());
    }
    Ok(Module {
        map: MapKind::Sff8472,
        identifier: Identifier::from_code(a0.identifier),
        identity: Identity {
            vendor: ascii(&a0.vendor),
            oui: oui(a0.oui),
            part_number: ascii(&a0.part_number),
            revision: ascii(&a0.revision),
            serial: ascii(&a0.serial),
            date_code: ascii(&a0.date_code),
        },
        connector: Connector::from_code(a0.connector),
        media,
        lanes: 1,
        length_m: media.is_cable().then_some(f64::from(a0.length_cable)),
        wavelength_nm: (!media.is_cable() && a0.wavelength != 0)
            .then_some(f64::from(a0.wavelength)),
        compliance,
        extended_compliance: extended,
        infiniband: Vec::new(),
        max_lane_gbps: crate::cable::rates::max_lane_gbps(&[], extended, br),
        diagnostics: a2.as_ref().map(|a2| diagnostics(&a0, a2)),
        thresholds: a2.as_ref().map(|a2| thresholds(&a0, a2)),
        flags: a2.as_ref().map(|a2| flags(&a0, a2)).unwrap_or_default(),
        cmis: None,
        checksums,
    })
}

fn media(a0: &A0) -> Media {
    if a0.passive_cable {
        Media::PassiveCopper
    } else if a0.active_cable {
        Media::ActiveCopper
    } else {
        match a0.wavelength {
            800..=950 => Media::MultiModeFibre,
            1200..=1650 => Media::SingleModeFibre,
            _ => Media::Unknown,
        }
    }
}

/// A linear calibration (SFF-8472 9.3): an unsigned 8.8 fixed-point slope and a signed
/// offset, applied to the raw word; internally calibrated modules need none.
fn linear(raw: u16, slope: u16, offset: u16, external: bool) -> u16 {
    if !external {
        return raw;
    }
    let v = f64::from(raw) * f64::from(slope) / 256.0 + f64::from(offset as i16);
    v.clamp(0.0, f64::from(u16::MAX)) as u16
}

/// Received power in mW: externally calibrated modules give a 4th-order polynomial.
fn rx_power_mw(a0: &A0, a2: &A2, raw: u16) -> f64 {
    if !a0.externally_calibrated {
        return units::power_mw(raw);
    }
    let c: Vec<f64> = a2
        .rx_power_calibration
        .chunks_exact(4)
        .map(|b| f64::from(f32::from_be_bytes([b[0], b[1], b[2], b[3]])))
        .collect();
    // Rx_PWR(4) comes first in memory.
    let x = f64::from(raw);
    let v = c[4] + c[3] * x + c[2] * x * x + c[1] * x.powi(3) + c[0] * x.powi(4);
    if v.is_finite() {
        (v.max(0.0)) / 10_000.0
    } else {
        0.0
    }
}

fn diagnostics(a0: &A0, a2: &A2) -> Diagnostics {
    let ext = a0.externally_calibrated;
    let temperature = if ext {
        let v = f64::from(a2.temperature as i16) * f64::from(a2.temperature_slope) / 256.0
            + f64::from(a2.temperature_offset as i16);
        v / 256.0
    } else {
        units::temperature_c(a2.temperature)
    };
    Diagnostics {
        temperature_c: Some(temperature),
        voltage_v: Some(units::voltage_v(linear(
            a2.voltage,
            a2.voltage_slope,
            a2.voltage_offset,
            ext,
        ))),
        rx_power_kind: if a0.rx_power_average {
            RxPowerKind::Average
        } else {
            RxPowerKind::Oma
        },
        lanes: vec![LaneMonitor {
            lane: 1,
            bias_ma: Some(units::bias_ma(linear(
                a2.bias,
                a2.bias_slope,
                a2.bias_offset,
                ext,
            ))),
            tx_power_mw: Some(units::power_mw(linear(
                a2.tx_power,
                a2.tx_power_slope,
                a2.tx_power_offset,
                ext,
            ))),
            rx_power_mw: Some(rx_power_mw(a0, a2, a2.rx_power)),
        }],
    }
}

fn bounds(bytes: &[u8; 8], unit: impl Fn(u16) -> f64) -> Bounds {
    let w = units::words(bytes);
    Bounds {
        high_alarm: unit(w[0]),
        low_alarm: unit(w[1]),
        high_warning: unit(w[2]),
        low_warning: unit(w[3]),
    }
}

fn thresholds(a0: &A0, a2: &A2) -> ModuleThresholds {
    ModuleThresholds {
        temperature_c: bounds(&a2.temperature_thresholds, units::temperature_c),
        voltage_v: bounds(&a2.voltage_thresholds, units::voltage_v),
        bias_ma: bounds(&a2.bias_thresholds, units::bias_ma),
        tx_power_mw: bounds(&a2.tx_power_thresholds, units::power_mw),
        rx_power_mw: bounds(&a2.rx_power_thresholds, |raw| rx_power_mw(a0, a2, raw)),
    }
}

/// Two bits of a flag byte (high at `hi`, low at `hi - 1`) as alarms or warnings.
fn pair(byte: u8, hi: u8) -> (bool, bool) {
    (byte & (1 << hi) != 0, byte & (1 << (hi - 1)) != 0)
}

fn alarms(a2: &A2, hi: u8, second: bool) -> Alarms {
    let i = usize::from(second);
    let (high_alarm, low_alarm) = pair(a2.alarms[i], hi);
    let (high_warning, low_warning) = pair(a2.warnings[i], hi);
    Alarms {
        high_alarm,
        low_alarm,
        high_warning,
        low_warning,
    }
}

fn flags(a0: &A0, a2: &A2) -> Flags {
    let implemented = a0.alarm_flags_implemented;
    Flags {
        latched: false,
        temperature: implemented.then(|| alarms(a2, 7, false)),
        voltage: implemented.then(|| alarms(a2, 5, false)),
        lanes: vec![LaneFlags {
            lane: 1,
            rx_los: a0.rx_los_implemented.then_some(a2.rx_los),
            tx_fault: a0.tx_fault_implemented.then_some(a2.tx_fault),
            bias: implemented.then(|| alarms(a2, 3, false)),
            tx_power: implemented.then(|| alarms(a2, 1, false)),
            rx_power: implemented.then(|| alarms(a2, 7, true)),
            ..LaneFlags::default()
        }],
    }
}
