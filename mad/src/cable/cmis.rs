//! CMIS 4.0/5.x (QSFP-DD, OSFP, QSFP and SFP with CMIS): the lower page (revision, module
//! state, module flags and monitors, media type), page 00h (identity, cable length,
//! connector, media technology, its checksum), page 01h (wavelength, what is advertised,
//! its checksum), page 02h (thresholds, its checksum) and page 11h of each bank read
//! (data-path states, lane flags and monitors: lanes 1-8 in bank 0, 9-16 in bank 1, and
//! so on, as page 01h byte 142 says which banks the module has). Offsets are CMIS 5.2's, as ethtool's
//! cmis.h and module-common.h also list them.

use super::codes::{
    bit, byte, media_of_technology, upper, upper_bit, Connector, HostInterface, Identifier,
    MapKind, Media,
};
use super::memory::{HalfAddr, MemoryError, ModuleMemory, ADDR_A0};
use super::model::{
    ascii, oui, units, Alarms, Checksum, CmisModuleState, CmisStates, DataPathState, Diagnostics,
    Flags, Identity, LaneFlags, LaneMonitor, Module, ModuleThresholds, RxPowerKind,
};
use super::rates::host_lane_gbps;
use super::sff8636::bounds;

crate::wire_struct! {
    /// The lower page, bytes 0-127 (CMIS 5.2 Table 8-4).
    pub struct Lower (128) {
        pub identifier: u8 = byte(0), 8, "SFF8024Identifier";
        /// Major revision in bits 7-4, minor in 3-0.
        pub revision: u8 = byte(1), 8, "CmisRevision";
        /// Page 00h only.
        pub flat_mem: bool = bit(2, 7), 1, "MemoryModel";
        pub module_state: u8 = bit(3, 3), 3, "ModuleState";
        /// Temperature bits 3-0 (low warning .. high alarm), Vcc bits 7-4.
        pub module_flags: u8 = byte(9), 8, "L-TempMon/L-VccMon flags";
        pub temperature: u16 = byte(14), 16, "TempMonValue";
        pub voltage: u16 = byte(16), 16, "VccMonVoltage";
        /// 0x01 MMF, 0x02 SMF, 0x03 passive copper, 0x04 active cable, 0x05 BASE-T.
        pub module_type: u8 = byte(85), 8, "ModuleMediaType";
        /// Application 1: host lane count in bits 7-4, media lane count in 3-0.
        pub app1_lanes: u8 = byte(88), 8, "HostLaneCount/MediaLaneCount";
        /// Applications 1-8, 4 bytes each: host interface ID (SFF-8024 Table 4-5), media
        /// interface ID, lane counts, host lane assignment; host interface 0xFF ends them.
        pub applications: [u8; 32] = byte(86), 256, "AppDescriptors1-8";
    }
}

crate::wire_struct! {
    /// Page 00h, bytes 128-255 (CMIS 5.2 Table 8-26).
    pub struct Page00 (128) {
        pub vendor: [u8; 16] = upper(129), 128, "VendorName";
        pub oui: [u8; 3] = upper(145), 24, "VendorOUI";
        pub part_number: [u8; 16] = upper(148), 128, "VendorPN";
        pub revision: [u8; 2] = upper(164), 16, "VendorRev";
        pub serial: [u8; 16] = upper(166), 128, "VendorSN";
        pub date_code: [u8; 8] = upper(182), 64, "DateCode";
        /// Bits 7-6: multiplier 0.1, 1, 10, 100 m; bits 5-0: the length.
        pub length: u8 = upper(202), 8, "LengthMultiplier/BaseLength";
        pub connector: u8 = upper(203), 8, "ConnectorType";
        pub media_technology: u8 = upper(212), 8, "MediaInterfaceTechnology";
        pub checksum: u8 = upper(222), 8, "PageChecksum";
    }
}

crate::wire_struct! {
    /// Page 01h, bytes 128-255 (CMIS 5.2 Table 8-41).
    pub struct Page01 (128) {
        /// Units of 0.05 nm.
        pub wavelength: u16 = upper(138), 16, "NominalWavelength";
        /// Bits 1-0: banks implemented: 0 bank 0, 1 banks 0-1, 2 banks 0-3.
        pub banks: u8 = upper(142), 8, "PagesAdvertisement/BanksSupported";
        /// 1: received power is average power, 0: OMA.
        pub rx_power_average: bool = upper_bit(151, 4), 1, "RxOpticalPowerMeasurementType";
        pub tx_flags_supported: u8 = upper(157), 8, "Tx flags supported";
        pub rx_flags_supported: u8 = upper(158), 8, "Rx flags supported";
        /// Bits 4-3: Tx bias multiplier 1, 2, 4.
        pub monitors_supported: u8 = upper(160), 8, "Monitors supported";
        pub checksum: u8 = upper(255), 8, "PageChecksum";
    }
}

crate::wire_struct! {
    /// Page 02h, the module's thresholds (CMIS 5.2 Table 8-60): high alarm, low alarm,
    /// high warning, low warning per monitor.
    pub struct Page02 (128) {
        pub temperature: [u8; 8] = upper(128), 64, "TempMon thresholds";
        pub voltage: [u8; 8] = upper(136), 64, "VccMon thresholds";
        pub tx_power: [u8; 8] = upper(176), 64, "OpticalPowerTx thresholds";
        pub bias: [u8; 8] = upper(184), 64, "LaserBiasTx thresholds";
        pub rx_power: [u8; 8] = upper(192), 64, "OpticalPowerRx thresholds";
        pub checksum: u8 = upper(255), 8, "PageChecksum";
    }
}

crate::wire_struct! {
    /// Page 11h of a bank: lane states, latched lane flags and lane monitors (CMIS 5.2
    /// Tables 8-77 to 8-83). Flag bytes hold a bit per lane, lane 1 in bit 0.
    pub struct Page11 (128) {
        /// A nibble per lane: lane 1 in byte 128's low nibble.
        pub data_path_states: [u8; 4] = upper(128), 32, "DPStateHostLane1-8";
        pub tx_fault: u8 = upper(135), 8, "FaultTx";
        pub tx_los: u8 = upper(136), 8, "LOSTx";
        pub tx_lol: u8 = upper(137), 8, "CDRLOLTx";
        /// High alarm, low alarm, high warning, low warning.
        pub tx_power_flags: [u8; 4] = upper(139), 32, "OpticalPowerTx flags";
        pub bias_flags: [u8; 4] = upper(143), 32, "LaserBiasTx flags";
        pub rx_los: u8 = upper(147), 8, "LOSRx";
        pub rx_lol: u8 = upper(148), 8, "CDRLOLRx";
        pub rx_power_flags: [u8; 4] = upper(149), 32, "OpticalPowerRx flags";
        pub tx_power: [u8; 16] = upper(154), 128, "OpticalPowerTx1-8";
        pub bias: [u8; 16] = upper(170), 128, "LaserBiasTx1-8";
        pub rx_power: [u8; 16] = upper(186), 128, "OpticalPowerRx1-8";
    }
}

fn decoded<T>(r: Result<T, crate::DecodeError>) -> Result<T, MemoryError> {
    // Every table here is 128 bytes and every half is 128 bytes: a decode cannot fail.
    r.map_err(|_| MemoryError::Empty)
}

/// Decodes a CMIS module: the lower page and page 00h are needed; pages 01h, 02h and 11h
/// are read where a paged module has them.
pub fn decode(memory: &ModuleMemory) -> Result<Module, MemoryError> {
    let lower = decoded(Lower::decode(memory.need(HalfAddr::lower(ADDR_A0))?))?;
    let page0_bytes = memory.need(HalfAddr::page(ADDR_A0, 0))?;
    let page0 = decoded(Page00::decode(page0_bytes))?;
    let paged = |page: u8| {
        (!lower.flat_mem)
            .then(|| memory.half(HalfAddr::page(ADDR_A0, page)))
            .flatten()
    };
    let mut checksums = vec![Checksum::over(
        "page 00h",
        "128-221",
        &page0_bytes[..94],
        page0.checksum,
    )];
    let page1 = match paged(1) {
        Some(b) => {
            let p = decoded(Page01::decode(b))?;
            checksums.push(Checksum::over(
                "page 01h",
                "130-254",
                &b[2..127],
                p.checksum,
            ));
            Some(p)
        }
        None => None,
    };
    let page2 = match paged(2) {
        Some(b) => {
            let p = decoded(Page02::decode(b))?;
            checksums.push(Checksum::over("page 02h", "128-254", &b[..127], p.checksum));
            Some(p)
        }
        None => None,
    };
    // Page 11h of each bank read: bank b holds lanes 8b+1 to 8b+8.
    let mut page11 = Vec::new();
    for bank in 0..4u8 {
        let at = HalfAddr {
            bank,
            ..HalfAddr::page(ADDR_A0, 0x11)
        };
        match memory.half(at).filter(|_| !lower.flat_mem) {
            Some(b) => page11.push(decoded(Page11::decode(b))?),
            None => break,
        }
    }
    let media = media(&lower, &page0);
    // A module that implements banks beyond bank 0 has 8 lanes in each.
    let lanes = match page11.len() {
        0 | 1 => lane_count(&lower),
        banks => 8 * banks as u8,
    };
    let bias_multiplier = page1.as_ref().map_or(1.0, |p| {
        f64::from(1u8 << ((p.monitors_supported >> 3) & 0x3).min(2))
    });
    Ok(Module {
        map: MapKind::Cmis,
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
        lanes,
        length_m: media.is_cable().then(|| length_m(page0.length)),
        wavelength_nm: page1
            .as_ref()
            .filter(|_| media.is_optical())
            .map(|p| f64::from(p.wavelength) / 20.0),
        compliance: host_interfaces(&lower)
            .iter()
            .map(|h| h.name().to_string())
            .collect(),
        extended_compliance: None,
        infiniband: Vec::new(),
        max_lane_gbps: host_interfaces(&lower)
            .into_iter()
            .filter_map(host_lane_gbps)
            .reduce(f64::max),
        diagnostics: Some(diagnostics(
            &lower,
            page1.as_ref(),
            &page11,
            lanes,
            bias_multiplier,
        )),
        thresholds: page2.as_ref().map(|p| ModuleThresholds {
            temperature_c: bounds(&p.temperature, units::temperature_c),
            voltage_v: bounds(&p.voltage, units::voltage_v),
            bias_ma: bounds(&p.bias, |raw| units::bias_ma(raw) * bias_multiplier),
            tx_power_mw: bounds(&p.tx_power, units::power_mw),
            rx_power_mw: bounds(&p.rx_power, units::power_mw),
        }),
        flags: flags(&lower, page1.as_ref(), &page11, lanes),
        cmis: Some(CmisStates {
            revision: format!("{}.{}", lower.revision >> 4, lower.revision & 0x0f),
            module_state: CmisModuleState::from_code(lower.module_state),
            data_path: (0..usize::from(lanes))
                .map_while(|i| lane_page(&page11, i))
                .map(|(p, i)| {
                    let b = p.data_path_states[i / 2];
                    let nibble = if i % 2 == 0 { b & 0x0f } else { b >> 4 };
                    DataPathState::from_code(nibble)
                })
                .collect(),
        }),
        checksums,
    })
}

/// The host interfaces of the applications the lower page advertises, up to the end of
/// the list (CMIS 5.2 Table 8-23).
fn host_interfaces(lower: &Lower) -> Vec<HostInterface> {
    lower
        .applications
        .chunks_exact(4)
        .map(|app| HostInterface::from_code(app[0]))
        .take_while(|h| !matches!(h, HostInterface::End | HostInterface::Undefined))
        .collect()
}

/// Lane `lane` (from 0) of the module: its bank's page 11h and its place in that bank.
fn lane_page(page11: &[Page11], lane: usize) -> Option<(&Page11, usize)> {
    page11.get(lane / 8).map(|p| (p, lane % 8))
}

/// Lanes of application 1 (its media lanes, else its host lanes), at most the 8 of bank 0.
fn lane_count(lower: &Lower) -> u8 {
    let media = lower.app1_lanes & 0x0f;
    let host = lower.app1_lanes >> 4;
    match (media, host) {
        (1..=8, _) => media,
        (_, 1..=8) => host,
        _ => 8,
    }
}

fn media(lower: &Lower, page0: &Page00) -> Media {
    match lower.module_type {
        0x01 => Media::MultiModeFibre,
        0x02 => Media::SingleModeFibre,
        0x03 => Media::PassiveCopper,
        0x04 => media_of_technology(page0.media_technology)
            .map(|_| Media::ActiveCopper)
            .unwrap_or(Media::ActiveOptical),
        0x05 => Media::BaseT,
        _ => media_of_technology(page0.media_technology).unwrap_or(Media::Unknown),
    }
}

/// Byte 202: a 6-bit length times 0.1, 1, 10 or 100 m.
fn length_m(code: u8) -> f64 {
    let base = f64::from(code & 0x3f);
    base * [0.1, 1.0, 10.0, 100.0][usize::from(code >> 6)]
}

fn diagnostics(
    lower: &Lower,
    page1: Option<&Page01>,
    page11: &[Page11],
    lanes: u8,
    bias_multiplier: f64,
) -> Diagnostics {
    Diagnostics {
        temperature_c: Some(units::temperature_c(lower.temperature)),
        voltage_v: Some(units::voltage_v(lower.voltage)),
        rx_power_kind: if page1.map_or(true, |p| p.rx_power_average) {
            RxPowerKind::Average
        } else {
            RxPowerKind::Oma
        },
        lanes: (0..usize::from(lanes))
            .map_while(|lane| Some((lane, lane_page(page11, lane)?)))
            .map(|(lane, (p, i))| {
                let word = |bytes: &[u8; 16]| u16::from_be_bytes([bytes[2 * i], bytes[2 * i + 1]]);
                LaneMonitor {
                    lane: lane as u8 + 1,
                    bias_ma: Some(units::bias_ma(word(&p.bias)) * bias_multiplier),
                    tx_power_mw: Some(units::power_mw(word(&p.tx_power))),
                    rx_power_mw: Some(units::power_mw(word(&p.rx_power))),
                }
            })
            .collect(),
    }
}

/// One lane's bit in each of four flag bytes (high alarm, low alarm, high warning, low
/// warning).
fn lane_alarms(bytes: [u8; 4], lane: usize) -> Alarms {
    let on = |b: u8| b & (1 << lane) != 0;
    Alarms {
        high_alarm: on(bytes[0]),
        low_alarm: on(bytes[1]),
        high_warning: on(bytes[2]),
        low_warning: on(bytes[3]),
    }
}

/// Module flags of byte 9: temperature in bits 0 (high alarm) to 3 (low warning), Vcc in
/// bits 4 to 7.
fn module_alarms(flags: u8, shift: u8) -> Alarms {
    let on = |b: u8| flags & (1 << (b + shift)) != 0;
    Alarms {
        high_alarm: on(0),
        low_alarm: on(1),
        high_warning: on(2),
        low_warning: on(3),
    }
}

fn flags(lower: &Lower, page1: Option<&Page01>, page11: &[Page11], lanes: u8) -> Flags {
    // Page 01h bytes 157-158 say which lane flags the module implements (bit 0 Tx fault,
    // 1 Tx LOS, 2 Tx LOL; Rx: 1 LOS, 2 LOL); without page 01h each is taken as implemented.
    let tx_has = |b: u8| page1.map_or(true, |p| p.tx_flags_supported & (1 << b) != 0);
    let rx_has = |b: u8| page1.map_or(true, |p| p.rx_flags_supported & (1 << b) != 0);
    Flags {
        latched: true,
        temperature: Some(module_alarms(lower.module_flags, 0)),
        voltage: Some(module_alarms(lower.module_flags, 4)),
        lanes: (0..usize::from(lanes))
            .map_while(|lane| Some((lane, lane_page(page11, lane)?)))
            .map(|(lane, (p, i))| {
                let on = |b: u8| b & (1 << i) != 0;
                LaneFlags {
                    lane: lane as u8 + 1,
                    rx_los: rx_has(1).then(|| on(p.rx_los)),
                    tx_los: tx_has(1).then(|| on(p.tx_los)),
                    rx_lol: rx_has(2).then(|| on(p.rx_lol)),
                    tx_lol: tx_has(2).then(|| on(p.tx_lol)),
                    tx_fault: tx_has(0).then(|| on(p.tx_fault)),
                    rx_power: Some(lane_alarms(p.rx_power_flags, i)),
                    tx_power: Some(lane_alarms(p.tx_power_flags, i)),
                    bias: Some(lane_alarms(p.bias_flags, i)),
                }
            })
            .collect(),
    }
}
