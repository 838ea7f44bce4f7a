//! What a module's memory says, the same for every map: identity, type, the live
//! diagnostics, the module's own thresholds, its flags, CMIS states and the checksums.
//! Values are in the units operators read (°C, V, mA, mW); the raw codes stay beside the
//! names where a code has one.

use serde::Serialize;

use super::codes::{Connector, ExtendedCompliance, Identifier, MapKind, Media};

/// One module, decoded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Module {
    /// The memory map it was read as.
    pub map: MapKind,
    pub identifier: Identifier,
    pub identity: Identity,
    pub connector: Connector,
    pub media: Media,
    /// Lanes the module has (4 for QSFP, 8 for QSFP-DD and OSFP, 1 for SFP).
    pub lanes: u8,
    /// The cable assembly's length in metres (copper and active cables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length_m: Option<f64>,
    /// The laser's nominal wavelength in nm (optical transceivers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavelength_nm: Option<f64>,
    /// What the module complies with, in words (Ethernet, InfiniBand, extended codes; a
    /// CMIS module's applications' host interfaces).
    pub compliance: Vec<String>,
    /// The extended compliance code (SFF-8024 Table 4-4), where the map has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended_compliance: Option<ExtendedCompliance>,
    /// InfiniBand rates the module declares (SFF-8636 byte 164): "SDR" .. "HDR".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub infiniband: Vec<&'static str>,
    /// The nominal signalling rate per lane in Gb/s the module is built for, from its
    /// InfiniBand codes, its extended compliance or its nominal bit rate, in that order
    /// (SFF-8636, SFF-8472), or the fastest host interface of its applications (CMIS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lane_gbps: Option<f64>,
    /// Live values, where the module monitors them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Diagnostics>,
    /// The module's own alarm and warning thresholds, where it has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<ModuleThresholds>,
    pub flags: Flags,
    /// CMIS: the module's state and each lane's data-path state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmis: Option<CmisStates>,
    pub checksums: Vec<Checksum>,
}

impl Module {
    /// Whether every checksum the map has holds.
    pub fn checksums_ok(&self) -> bool {
        self.checksums.iter().all(|c| c.ok())
    }
}

/// Who made the module and which one it is: ASCII fields, trailing blanks removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Identity {
    pub vendor: String,
    /// The IEEE company ID, `00:02:c9`.
    pub oui: String,
    pub part_number: String,
    pub revision: String,
    pub serial: String,
    /// The vendor's date code as written (YYMMDD and an optional lot).
    pub date_code: String,
}

/// Whether received power is measured as average or as OMA (SFF-8472 byte 92 bit 3,
/// SFF-8636 byte 220 bit 3, CMIS page 01h byte 151 bit 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RxPowerKind {
    Average,
    Oma,
}

/// Live values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voltage_v: Option<f64>,
    pub rx_power_kind: RxPowerKind,
    /// One per lane, lane 1 first.
    pub lanes: Vec<LaneMonitor>,
}

/// One lane's live values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneMonitor {
    /// Lane number, from 1.
    pub lane: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bias_ma: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_power_mw: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_power_mw: Option<f64>,
}

/// A monitor's four thresholds, in the monitor's unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bounds {
    pub high_alarm: f64,
    pub low_alarm: f64,
    pub high_warning: f64,
    pub low_warning: f64,
}

/// The module's own thresholds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuleThresholds {
    pub temperature_c: Bounds,
    pub voltage_v: Bounds,
    pub bias_ma: Bounds,
    pub tx_power_mw: Bounds,
    pub rx_power_mw: Bounds,
}

/// One monitor's alarm and warning flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Alarms {
    pub high_alarm: bool,
    pub low_alarm: bool,
    pub high_warning: bool,
    pub low_warning: bool,
}

impl Alarms {
    /// From a nibble ordered high alarm, low alarm, high warning, low warning from its most
    /// significant bit (SFF-8636 bytes 6-14, SFF-8472 bytes 112-117 in their pairs).
    pub fn from_nibble(n: u8) -> Alarms {
        Alarms {
            high_alarm: n & 0x8 != 0,
            low_alarm: n & 0x4 != 0,
            high_warning: n & 0x2 != 0,
            low_warning: n & 0x1 != 0,
        }
    }
    pub fn any(&self) -> bool {
        self.high_alarm || self.low_alarm || self.high_warning || self.low_warning
    }
}

/// The flags a module raises.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Flags {
    /// Whether the flags are latched (set until read: SFF-8636, CMIS) or live (SFF-8472).
    pub latched: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<Alarms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voltage: Option<Alarms>,
    /// One per lane, lane 1 first.
    pub lanes: Vec<LaneFlags>,
}

/// One lane's flags; a state the module does not report is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LaneFlags {
    pub lane: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_los: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_los: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_lol: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_lol: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_fault: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_power: Option<Alarms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_power: Option<Alarms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bias: Option<Alarms>,
}

impl LaneFlags {
    /// The lane's states by name, as reports and series name them: rx_los, tx_los, rx_lol,
    /// tx_lol, tx_fault (`None` where the module does not report one).
    pub fn states(&self) -> [(&'static str, Option<bool>); 5] {
        [
            ("rx_los", self.rx_los),
            ("tx_los", self.tx_los),
            ("rx_lol", self.rx_lol),
            ("tx_lol", self.tx_lol),
            ("tx_fault", self.tx_fault),
        ]
    }
}

/// CMIS module and data-path states (CMIS 5.x Table 8-7, Table 8-71).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CmisStates {
    /// "5.0" from byte 1.
    pub revision: String,
    pub module_state: CmisModuleState,
    /// One per host lane, lane 1 first (page 11h, bank 0).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub data_path: Vec<DataPathState>,
}

crate::coded_enum! {
    /// CMIS module state (lower page byte 3 bits 3-1).
    pub enum CmisModuleState: u8 {
        LowPower = 1, "ModuleLowPwr", "LowPwr";
        PowerUp = 2, "ModulePwrUp", "PwrUp";
        Ready = 3, "ModuleReady", "Ready";
        PowerDown = 4, "ModulePwrDn", "PwrDn";
        Fault = 5, "ModuleFault", "Fault";
    }
}

crate::coded_enum! {
    /// CMIS data-path state of one lane (page 11h bytes 128-131, a nibble per lane).
    pub enum DataPathState: u8 {
        Deactivated = 1, "DPDeactivated", "Deact";
        Init = 2, "DPInit", "Init";
        Deinit = 3, "DPDeinit", "Deinit";
        Activated = 4, "DPActivated", "Active";
        TxTurnOn = 5, "DPTxTurnOn", "TxOn";
        TxTurnOff = 6, "DPTxTurnOff", "TxOff";
        Initialized = 7, "DPInitialized", "Inited";
    }
}

/// One checksum of a map: what it covers, what the module stored, what the bytes sum to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checksum {
    /// The specification's name: "CC_BASE", "CC_EXT", "CC_DMI", "page 00h".
    pub name: &'static str,
    /// The bytes covered, as the specification writes them ("128-190").
    pub covers: &'static str,
    pub stored: u8,
    pub computed: u8,
}

impl Checksum {
    /// The low 8 bits of the sum of `bytes` (every map's checksum is this).
    pub fn over(name: &'static str, covers: &'static str, bytes: &[u8], stored: u8) -> Checksum {
        let computed = bytes.iter().fold(0u8, |acc, b| acc.wrapping_add(*b));
        Checksum {
            name,
            covers,
            stored,
            computed,
        }
    }
    pub fn ok(&self) -> bool {
        self.stored == self.computed
    }
}

/// Units of the maps' monitors (SFF-8472 Table 9-11, SFF-8636 Table 6-7, CMIS Table 8-10).
pub mod units {
    /// A signed 1/256 °C word.
    pub fn temperature_c(raw: u16) -> f64 {
        f64::from(raw as i16) / 256.0
    }
    /// An unsigned 100 µV word.
    pub fn voltage_v(raw: u16) -> f64 {
        f64::from(raw) / 10_000.0
    }
    /// An unsigned 2 µA word.
    pub fn bias_ma(raw: u16) -> f64 {
        f64::from(raw) * 0.002
    }
    /// An unsigned 0.1 µW word.
    pub fn power_mw(raw: u16) -> f64 {
        f64::from(raw) / 10_000.0
    }
    /// Milliwatts in dBm; `None` for no light at all.
    pub fn dbm(mw: f64) -> Option<f64> {
        (mw > 0.0).then(|| 10.0 * mw.log10())
    }
    /// Big-endian words from a byte run.
    pub fn words(bytes: &[u8]) -> Vec<u16> {
        bytes
            .chunks_exact(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]))
            .collect()
    }
}

/// ASCII text of a fixed field, trailing blanks and NULs removed; bytes outside printable
/// ASCII become '?' (untrusted: the terminal escapes the rest).
pub fn ascii(bytes: &[u8]) -> String {
    let text: String = bytes
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                char::from(b)
            } else if b == 0 {
                ' '
            } else {
                '?'
            }
        })
        .collect();
    text.trim_end().to_string()
}

/// `00:02:c9`.
pub fn oui(bytes: [u8; 3]) -> String {
    format!("{:02x}:{:02x}:{:02x}", bytes[0], bytes[1], bytes[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_as_the_maps_define_them() {
        // SFF-8472 Table 9-11's own examples: 0x7D00 is +125 °C, 0xD800 is -40 °C.
        assert_eq!(units::temperature_c(0x7d00), 125.0);
        assert_eq!(units::temperature_c(0xd800), -40.0);
        assert_eq!(units::voltage_v(33000), 3.3);
        assert_eq!(units::power_mw(10000), 1.0);
        assert_eq!(units::dbm(1.0), Some(0.0));
        assert_eq!(units::dbm(0.0), None);
    }

    #[test]
    fn checksums_are_low_byte_sums() {
        let c = Checksum::over("CC_BASE", "0-62", &[0xff, 0x02], 0x01);
        assert!(c.ok());
        assert!(!Checksum::over("CC_BASE", "0-62", &[1], 2).ok());
    }

    #[test]
    fn ascii_fields_are_trimmed_and_tamed() {
        assert_eq!(ascii(b"Mellanox        "), "Mellanox");
        assert_eq!(ascii(b"A\x1b[2J\0\0"), "A?[2J");
    }
}
