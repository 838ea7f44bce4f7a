//! SFF-8024 reference codes every module memory map shares (SFF-8024 Rev 4.x: Table 4-1
//! identifiers, Table 4-3 connectors, Table 4-4 extended specification compliance), and
//! the byte-and-bit arithmetic of the maps' tables.
//!
//! The SFF specifications number bytes from 0 and bits 7 (most significant) to 0; the
//! layout tables of this crate number bits from the most significant bit of byte 0
//! (`wire_struct!`). [`byte`] and [`bit`] turn the first into the second, so a table row
//! reads as the specification writes it: `bit(92, 6)` is bit 6 of byte 92.

/// The table offset of byte `n` of a map (`wire_struct!` numbering).
pub const fn byte(n: usize) -> usize {
    n * 8
}

/// The table offset of bit `b` (7 = most significant) of byte `n`.
pub const fn bit(n: usize, b: usize) -> usize {
    n * 8 + (7 - b)
}

/// The table offset of byte `n` of an upper page (bytes 128-255) in a table of that page
/// alone: the specifications address upper pages from 128.
pub const fn upper(n: usize) -> usize {
    (n - 128) * 8
}

/// The table offset of bit `b` of upper-page byte `n`.
pub const fn upper_bit(n: usize, b: usize) -> usize {
    (n - 128) * 8 + (7 - b)
}

crate::coded_enum! {
    /// What a module says it is: SFF-8024 Table 4-1, byte 0 of every map. 0x11 is QSFP28
    /// and QSFP56 alike; which rate a QSFP28-coded module carries is in its compliance bytes.
    pub enum Identifier: u8 {
        Unknown0 = 0x00, "Unknown or unspecified", "none";
        Gbic = 0x01, "GBIC", "GBIC";
        Soldered = 0x02, "Module soldered to motherboard", "soldered";
        Sfp = 0x03, "SFP/SFP+/SFP28", "SFP";
        Xfp = 0x06, "XFP", "XFP";
        DwdmSfp = 0x0b, "DWDM-SFP/SFP+", "DWDM-SFP";
        Qsfp = 0x0c, "QSFP", "QSFP";
        QsfpPlus = 0x0d, "QSFP+", "QSFP+";
        Cxp = 0x0e, "CXP", "CXP";
        Qsfp28 = 0x11, "QSFP28", "QSFP28";
        Cxp2 = 0x12, "CXP2", "CXP2";
        MicroQsfp = 0x17, "microQSFP", "uQSFP";
        QsfpDd = 0x18, "QSFP-DD", "QSFP-DD";
        Osfp = 0x19, "OSFP", "OSFP";
        Dsfp = 0x1b, "DSFP", "DSFP";
        QsfpCmis = 0x1e, "QSFP+ or later with CMIS", "QSFP-CMIS";
        SfpDd = 0x1f, "SFP-DD", "SFP-DD";
        SfpCmis = 0x20, "SFP+ with CMIS", "SFP-CMIS";
    }
}

/// Which memory map a module's identifier says to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapKind {
    /// SFF-8472 (SFP): A0h identity, A2h diagnostics.
    Sff8472,
    /// SFF-8636 (QSFP+, QSFP28, QSFP56): lower page, pages 00h and 03h.
    Sff8636,
    /// CMIS 4.0/5.x (QSFP-DD, OSFP, QSFP with CMIS): pages 00h, 01h, 02h, 11h.
    Cmis,
}

impl MapKind {
    /// The map an identifier code means, if this crate reads it.
    pub fn of(identifier: Identifier) -> Option<MapKind> {
        use Identifier::*;
        match identifier {
            Sfp | Gbic | Soldered | DwdmSfp => Some(MapKind::Sff8472),
            Qsfp | QsfpPlus | Qsfp28 | MicroQsfp => Some(MapKind::Sff8636),
            QsfpDd | Osfp | Dsfp | QsfpCmis | SfpDd | SfpCmis => Some(MapKind::Cmis),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MapKind::Sff8472 => "SFF-8472",
            MapKind::Sff8636 => "SFF-8636",
            MapKind::Cmis => "CMIS",
        }
    }
}

crate::coded_enum! {
    /// The connector: SFF-8024 Table 4-3.
    pub enum Connector: u8 {
        Unspecified = 0x00, "Unknown or unspecified", "-";
        Sc = 0x01, "SC", "SC";
        FcStyle1 = 0x02, "Fibre Channel Style 1 copper", "FC1";
        FcStyle2 = 0x03, "Fibre Channel Style 2 copper", "FC2";
        BncTnc = 0x04, "BNC/TNC", "BNC";
        FcCoax = 0x05, "Fibre Channel coax headers", "FCcoax";
        FiberJack = 0x06, "Fiber Jack", "FJ";
        Lc = 0x07, "LC", "LC";
        MtRj = 0x08, "MT-RJ", "MT-RJ";
        Mu = 0x09, "MU", "MU";
        Sg = 0x0a, "SG", "SG";
        OpticalPigtail = 0x0b, "Optical pigtail", "pigtail";
        Mpo1x12 = 0x0c, "MPO 1x12", "MPO12";
        Mpo2x16 = 0x0d, "MPO 2x16", "MPO2x16";
        HssdcII = 0x20, "HSSDC II", "HSSDC";
        CopperPigtail = 0x21, "Copper pigtail", "Cu-pigtail";
        Rj45 = 0x22, "RJ45", "RJ45";
        NoSeparable = 0x23, "No separable connector", "none";
        Mxc2x16 = 0x24, "MXC 2x16", "MXC";
        CsOptical = 0x25, "CS optical connector", "CS";
        SnOptical = 0x26, "SN (Mini CS) optical connector", "SN";
        Mpo2x12 = 0x27, "MPO 2x12", "MPO2x12";
        Mpo1x16 = 0x28, "MPO 1x16", "MPO16";
    }
}

crate::coded_enum! {
    /// Extended specification compliance: SFF-8024 Table 4-4 (SFF-8636 byte 192, SFF-8472
    /// byte 36). Only the codes an InfiniBand or RoCE fabric meets are named.
    pub enum ExtendedCompliance: u8 {
        Unspecified = 0x00, "Unspecified", "-";
        Aoc100G = 0x01, "100G AOC or 25GAUI C2M AOC (BER 5e-5)", "100G-AOC";
        Sr4G100 = 0x02, "100GBASE-SR4 or 25GBASE-SR", "100G-SR4";
        Lr4G100 = 0x03, "100GBASE-LR4 or 25GBASE-LR", "100G-LR4";
        Er4G100 = 0x04, "100GBASE-ER4 or 25GBASE-ER", "100G-ER4";
        Sr10G100 = 0x05, "100GBASE-SR10", "100G-SR10";
        Cwdm4G100 = 0x06, "100G CWDM4", "100G-CWDM4";
        Psm4G100 = 0x07, "100G PSM4 parallel SMF", "100G-PSM4";
        Acc100G = 0x08, "100G ACC or 25GAUI C2M ACC (BER 5e-5)", "100G-ACC";
        Cr4G100 = 0x0b, "100GBASE-CR4, 25GBASE-CR CA-25G-L or 50GBASE-CR2 with RS FEC", "100G-CR4";
        Cr25GS = 0x0c, "25GBASE-CR CA-25G-S or 50GBASE-CR2 with BASE-R FEC", "25G-CR-S";
        Cr25GN = 0x0d, "25GBASE-CR CA-25G-N or 50GBASE-CR2 with no FEC", "25G-CR-N";
        Er4G40 = 0x10, "40GBASE-ER4", "40G-ER4";
        Aoc100G12 = 0x18, "100G AOC or 25GAUI C2M AOC (BER 1e-12)", "100G-AOC12";
        Acc100G12 = 0x19, "100G ACC or 25GAUI C2M ACC (BER 1e-12)", "100G-ACC12";
        Dr100G = 0x25, "100GBASE-DR", "100G-DR";
        Acc200G = 0x30, "50GAUI, 100GAUI-2 or 200GAUI-4 C2M ACC (BER 1e-6)", "200G-ACC";
        Aoc200G = 0x31, "50GAUI, 100GAUI-2 or 200GAUI-4 C2M AOC (BER 1e-6)", "200G-AOC";
        Acc200G12 = 0x32, "50GAUI, 100GAUI-2 or 200GAUI-4 C2M ACC (BER 2.6e-4)", "200G-ACC12";
        Aoc200G12 = 0x33, "50GAUI, 100GAUI-2 or 200GAUI-4 C2M AOC (BER 2.6e-4)", "200G-AOC12";
        Cr4G200 = 0x40, "50GBASE-CR, 100GBASE-CR2 or 200GBASE-CR4", "200G-CR4";
        Sr4G200 = 0x41, "50GBASE-SR, 100GBASE-SR2 or 200GBASE-SR4", "200G-SR4";
        Dr4G200 = 0x42, "50GBASE-FR or 200GBASE-DR4", "200G-DR4";
        Fr4G200 = 0x43, "200GBASE-FR4", "200G-FR4";
        Psm4G200 = 0x44, "200G 1550 nm PSM4", "200G-PSM4";
        Lr50G = 0x45, "50GBASE-LR", "50G-LR";
        Lr4G200 = 0x46, "200GBASE-LR4", "200G-LR4";
    }
}

impl ExtendedCompliance {
    /// The signalling rate of one lane the code implies, in Gb/s (the electrical lanes of a
    /// 100G code are 25.78125, of a 200G code 53.125), where the code says.
    pub fn lane_gbps(self) -> Option<f64> {
        use ExtendedCompliance::*;
        match self {
            Aoc100G | Sr4G100 | Lr4G100 | Er4G100 | Cwdm4G100 | Psm4G100 | Acc100G | Cr4G100
            | Cr25GS | Cr25GN | Aoc100G12 | Acc100G12 => Some(25.78125),
            Sr10G100 | Er4G40 => Some(10.3125),
            Dr100G => Some(53.125),
            Acc200G | Aoc200G | Acc200G12 | Aoc200G12 | Cr4G200 | Sr4G200 | Dr4G200 | Fr4G200
            | Psm4G200 | Lr50G | Lr4G200 => Some(53.125),
            _ => None,
        }
    }
}

crate::coded_enum! {
    /// Host electrical interface of a CMIS application (SFF-8024 Table 4-5, the first byte
    /// of each application descriptor), as sonic-platform-common's SFF-8024 table names
    /// the codes (sonic_xcvr/codes/public/sff8024.py, commit 8607c9f3). Only codes whose
    /// lane rate the name gives are named.
    pub enum HostInterface: u8 {
        Undefined = 0, "Undefined", "-";
        Aui25G = 5, "25GAUI C2M (Annex 109B)", "25GAUI";
        Xlaui = 6, "XLAUI C2M (Annex 83B)", "XLAUI";
        Xlppi = 7, "XLPPI (Annex 86A)", "XLPPI";
        Laui2 = 8, "LAUI-2 C2M (Annex 135C)", "LAUI-2";
        Aui50G2 = 9, "50GAUI-2 C2M (Annex 135E)", "50GAUI-2";
        Aui50G1 = 10, "50GAUI-1 C2M (Annex 135G)", "50GAUI-1";
        Caui4 = 11, "CAUI-4 C2M (Annex 83E)", "CAUI-4";
        Aui100G4 = 12, "100GAUI-4 C2M (Annex 135E)", "100GAUI-4";
        Aui100G2 = 13, "100GAUI-2 C2M (Annex 135G)", "100GAUI-2";
        Aui200G8 = 14, "200GAUI-8 C2M (Annex 120C)", "200GAUI-8";
        Aui200G4 = 15, "200GAUI-4 C2M (Annex 120E)", "200GAUI-4";
        Aui400G16 = 16, "400GAUI-16 C2M (Annex 120C)", "400GAUI-16";
        Aui400G8 = 17, "400GAUI-8 C2M (Annex 120E)", "400GAUI-8";
        Cr25GL = 20, "25GBASE-CR CA-L (Clause 110)", "25G-CR-L";
        Cr25GS = 21, "25GBASE-CR CA-S (Clause 110)", "25G-CR-S";
        Cr25GN = 22, "25GBASE-CR CA-N (Clause 110)", "25G-CR-N";
        Cr40G4 = 23, "40GBASE-CR4 (Clause 85)", "40G-CR4";
        Cr50G = 24, "50GBASE-CR (Clause 126)", "50G-CR";
        Cr100G4 = 26, "100GBASE-CR4 (Clause 92)", "100G-CR4";
        Cr100G2 = 27, "100GBASE-CR2 (Clause 136)", "100G-CR2";
        Cr200G4 = 28, "200GBASE-CR4 (Clause 136)", "200G-CR4";
        Cr400G8 = 29, "400G CR8", "400G-CR8";
        Cr200G1 = 30, "200GBASE-CR1 (Clause179)", "200G-CR1";
        Cr400G2 = 31, "400GBASE-CR2 (Clause179)", "400G-CR2";
        IbSdr = 44, "IB SDR (Arch.Spec.Vol.2)", "IB-SDR";
        IbDdr = 45, "IB DDR (Arch.Spec.Vol.2)", "IB-DDR";
        IbQdr = 46, "IB QDR (Arch.Spec.Vol.2)", "IB-QDR";
        IbFdr = 47, "IB FDR (Arch.Spec.Vol.2)", "IB-FDR";
        IbEdr = 48, "IB EDR (Arch.Spec.Vol.2)", "IB-EDR";
        IbHdr = 49, "IB HDR (Arch.Spec.Vol.2)", "IB-HDR";
        IbNdr = 50, "IB NDR", "IB-NDR";
        Cr100G1 = 70, "100GBASE-CR1 (Clause 162)", "100G-CR1";
        Cr200G2 = 71, "200GBASE-CR2 (Clause 162)", "200G-CR2";
        Cr400G4 = 72, "400GBASE-CR4 (Clause 162)", "400G-CR4";
        Cr800G8 = 73, "800G-ETC-CR8", "800G-CR8";
        Aui100G1S = 75, "100GAUI-1-S C2M (Annex 120G)", "100GAUI-1-S";
        Aui100G1L = 76, "100GAUI-1-L C2M (Annex 120G)", "100GAUI-1-L";
        Aui200G2S = 77, "200GAUI-2-S C2M (Annex 120G)", "200GAUI-2-S";
        Aui200G2L = 78, "200GAUI-2-L C2M (Annex 120G)", "200GAUI-2-L";
        Aui400G4S = 79, "400GAUI-4-S C2M (Annex 120G)", "400GAUI-4-S";
        Aui400G4L = 80, "400GAUI-4-L C2M (Annex 120G)", "400GAUI-4-L";
        Aui800G8S = 81, "800GAUI-8 S C2M (Annex 120G)", "800GAUI-8-S";
        Aui800G8L = 82, "800GAUI-8 L C2M (Annex 120G)", "800GAUI-8-L";
        Cr800G4 = 87, "800GBASE-CR4 (Clause179)", "800G-CR4";
        Cr1600G8 = 88, "1.6TBASE-CR8 (Clause179)", "1.6T-CR8";
        Aui200G1 = 128, "200GAUI-1 (Annex176E)", "200GAUI-1";
        Aui400G2 = 129, "400GAUI-2 (Annex176E)", "400GAUI-2";
        Aui800G4 = 130, "800GAUI-4 (Annex176E)", "800GAUI-4";
        Aui1600G8 = 131, "1.6TAUI-8 (Annex176E)", "1.6TAUI-8";
        /// The end of the application list.
        End = 0xff, "End of list", "end";
    }
}

impl HostInterface {
    /// What one lane carries, in the nominal Gb/s the interface's name gives (its rate
    /// over its lanes: 400GAUI-8 is 50), or the InfiniBand speed's name.
    pub fn lane(self) -> Option<HostLane> {
        use HostInterface::*;
        use HostLane::{Ib, Nominal};
        Some(match self {
            Xlaui | Xlppi | Cr40G4 => Nominal(10.0),
            Aui25G | Laui2 | Aui50G2 | Caui4 | Aui100G4 | Aui200G8 | Aui400G16 | Cr25GL
            | Cr25GS | Cr25GN | Cr100G4 => Nominal(25.0),
            Aui50G1 | Aui100G2 | Aui200G4 | Aui400G8 | Cr50G | Cr100G2 | Cr200G4 | Cr400G8 => {
                Nominal(50.0)
            }
            Cr100G1 | Cr200G2 | Cr400G4 | Cr800G8 | Aui100G1S | Aui100G1L | Aui200G2S
            | Aui200G2L | Aui400G4S | Aui400G4L | Aui800G8S | Aui800G8L => Nominal(100.0),
            Cr200G1 | Cr400G2 | Cr800G4 | Cr1600G8 | Aui200G1 | Aui400G2 | Aui800G4 | Aui1600G8 => {
                Nominal(200.0)
            }
            IbSdr => Ib("SDR"),
            IbDdr => Ib("DDR"),
            IbQdr => Ib("QDR"),
            IbFdr => Ib("FDR"),
            IbEdr => Ib("EDR"),
            IbHdr => Ib("HDR"),
            IbNdr => Ib("NDR"),
            _ => return None,
        })
    }
}

/// One lane of a host interface: a nominal Ethernet-style rate, or an InfiniBand speed
/// by its name in `SPEEDS`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HostLane {
    Nominal(f64),
    Ib(&'static str),
}

/// What carries a module's signal, as the operator thinks of the cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Media {
    /// A passive copper (direct attach) cable: it reports LOS/LOL-like states it does not
    /// have, so those are never judged.
    PassiveCopper,
    /// An active copper cable (a redriver or retimer in the plug).
    ActiveCopper,
    /// An active optical cable.
    ActiveOptical,
    /// A transceiver on multi-mode fibre.
    MultiModeFibre,
    /// A transceiver on single-mode fibre.
    SingleModeFibre,
    /// A BASE-T (RJ45) module.
    BaseT,
    /// Not said, or not read.
    Unknown,
}

impl Media {
    pub fn name(self) -> &'static str {
        match self {
            Media::PassiveCopper => "passive copper",
            Media::ActiveCopper => "active copper",
            Media::ActiveOptical => "active optical cable",
            Media::MultiModeFibre => "multi-mode fibre",
            Media::SingleModeFibre => "single-mode fibre",
            Media::BaseT => "BASE-T",
            Media::Unknown => "unknown",
        }
    }
    /// Whether the module carries light (and so its LOS, LOL and powers mean something).
    pub fn is_optical(self) -> bool {
        matches!(
            self,
            Media::ActiveOptical | Media::MultiModeFibre | Media::SingleModeFibre
        )
    }
    /// Whether the module is a cable assembly (its length is the cable's).
    pub fn is_cable(self) -> bool {
        matches!(
            self,
            Media::PassiveCopper | Media::ActiveCopper | Media::ActiveOptical
        )
    }
}

/// The transmitter technology nibble of SFF-8636 byte 147 (bits 7-4) and the CMIS media
/// interface technology of page 00h byte 212 share one code list (SFF-8636 Table 6-19,
/// CMIS Table 8-40): 0x0A is copper unequalized, 0x0B passive equalized, 0x0C-0x0F active
/// copper; below 0x0A are lasers.
pub fn media_of_technology(code: u8) -> Option<Media> {
    match code {
        0x0a | 0x0b => Some(Media::PassiveCopper),
        0x0c..=0x0f => Some(Media::ActiveCopper),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_numbering_follows_the_sff_tables() {
        // Bit 7 is the most significant bit of its byte, as wire_struct numbers bit 0.
        assert_eq!(bit(0, 7), 0);
        assert_eq!(bit(92, 6), 92 * 8 + 1);
        assert_eq!(upper(148), 20 * 8);
        assert_eq!(upper_bit(220, 3), 92 * 8 + 4);
    }

    #[test]
    fn identifiers_choose_their_map() {
        // SFF-8024 Table 4-1: 0x11 is QSFP28 (read as SFF-8636), 0x18 QSFP-DD (CMIS).
        assert_eq!(
            MapKind::of(Identifier::from_code(0x11)),
            Some(MapKind::Sff8636)
        );
        assert_eq!(
            MapKind::of(Identifier::from_code(0x18)),
            Some(MapKind::Cmis)
        );
        assert_eq!(
            MapKind::of(Identifier::from_code(0x03)),
            Some(MapKind::Sff8472)
        );
        assert_eq!(MapKind::of(Identifier::from_code(0x7f)), None);
    }
}
