//! Link width and speed as PortInfo encodes them (IBA 14.2.5.6, LinkWidth*/LinkSpeed*/
//! LinkSpeedExt*), with the arithmetic a health check needs: the best width/speed two
//! ends both support and enable, and data rates.

use serde::{Deserialize, Serialize};

/// One active link width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Width {
    X1,
    X2,
    X4,
    X8,
    X12,
}

impl Width {
    pub const ALL: [Width; 5] = [Width::X1, Width::X2, Width::X4, Width::X8, Width::X12];

    /// The PortInfo bit for this width (1x=1, 4x=2, 8x=4, 12x=8, 2x=16).
    pub fn bit(self) -> u8 {
        match self {
            Width::X1 => 1,
            Width::X4 => 2,
            Width::X8 => 4,
            Width::X12 => 8,
            Width::X2 => 16,
        }
    }
    /// Decode LinkWidthActive (exactly one bit set); `None` for 0 or an invalid code.
    pub fn from_active(code: u8) -> Option<Width> {
        Width::ALL.into_iter().find(|w| w.bit() == code)
    }
    pub fn lanes(self) -> u32 {
        match self {
            Width::X1 => 1,
            Width::X2 => 2,
            Width::X4 => 4,
            Width::X8 => 8,
            Width::X12 => 12,
        }
    }
    /// Parse "4x", "4X" or "4".
    pub fn parse(text: &str) -> Option<Width> {
        let t = text.trim().trim_end_matches(['x', 'X']);
        Width::ALL.into_iter().find(|w| w.lanes().to_string() == t)
    }
}

impl std::fmt::Display for Width {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}X", self.lanes())
    }
}

/// One active lane speed. SDR/DDR/QDR come from LinkSpeed*, FDR and faster from LinkSpeedExt*.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Speed {
    Sdr,
    Ddr,
    Qdr,
    Fdr,
    Edr,
    Hdr,
    Ndr,
}

impl Speed {
    pub const ALL: [Speed; 7] = [
        Speed::Sdr,
        Speed::Ddr,
        Speed::Qdr,
        Speed::Fdr,
        Speed::Edr,
        Speed::Hdr,
        Speed::Ndr,
    ];

    /// Signalling rate of one lane in Gb/s.
    pub fn lane_gbps(self) -> f64 {
        match self {
            Speed::Sdr => 2.5,
            Speed::Ddr => 5.0,
            Speed::Qdr => 10.0,
            Speed::Fdr => 14.0625,
            Speed::Edr => 25.78125,
            Speed::Hdr => 53.125,
            Speed::Ndr => 106.25,
        }
    }
    /// Data rate of one lane after line encoding (8b/10b up to QDR, 64b/66b from FDR; HDR
    /// and NDR use PAM4 with FEC and are quoted at their nominal 50/100 Gb/s).
    pub fn lane_data_gbps(self) -> f64 {
        match self {
            Speed::Sdr => 2.0,
            Speed::Ddr => 4.0,
            Speed::Qdr => 8.0,
            Speed::Fdr => 13.636_363_636_363_637,
            Speed::Edr => 25.0,
            Speed::Hdr => 50.0,
            Speed::Ndr => 100.0,
        }
    }
    /// `(in LinkSpeed field, bit)`: base speeds live in LinkSpeed*, the rest in LinkSpeedExt*.
    pub fn bit(self) -> (bool, u8) {
        match self {
            Speed::Sdr => (false, 1),
            Speed::Ddr => (false, 2),
            Speed::Qdr => (false, 4),
            Speed::Fdr => (true, 1),
            Speed::Edr => (true, 2),
            Speed::Hdr => (true, 4),
            Speed::Ndr => (true, 8),
        }
    }
    /// Decode the active speed: LinkSpeedExtActive wins when non-zero (and the port
    /// supports extended speeds), else LinkSpeedActive.
    pub fn from_active(base: u8, ext: u8) -> Option<Speed> {
        if ext != 0 {
            return Speed::ALL.into_iter().find(|s| s.bit() == (true, ext));
        }
        Speed::ALL.into_iter().find(|s| s.bit() == (false, base))
    }
    pub fn name(self) -> &'static str {
        match self {
            Speed::Sdr => "SDR",
            Speed::Ddr => "DDR",
            Speed::Qdr => "QDR",
            Speed::Fdr => "FDR",
            Speed::Edr => "EDR",
            Speed::Hdr => "HDR",
            Speed::Ndr => "NDR",
        }
    }
    pub fn parse(text: &str) -> Option<Speed> {
        let t = text.trim().to_ascii_uppercase();
        Speed::ALL.into_iter().find(|s| s.name() == t)
    }
}

impl std::fmt::Display for Speed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of widths (LinkWidthSupported / LinkWidthEnabled bitmask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct WidthSet(pub u8);

impl WidthSet {
    pub fn contains(self, w: Width) -> bool {
        self.0 & w.bit() != 0
    }
    pub fn intersect(self, other: WidthSet) -> WidthSet {
        WidthSet(self.0 & other.0)
    }
    pub fn best(self) -> Option<Width> {
        Width::ALL.into_iter().rev().find(|w| self.contains(*w))
    }
    pub fn iter(self) -> impl Iterator<Item = Width> {
        Width::ALL.into_iter().filter(move |w| self.contains(*w))
    }
}

/// A set of speeds: the LinkSpeed mask (SDR/DDR/QDR) and the LinkSpeedExt mask (FDR..NDR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct SpeedSet {
    pub base: u8,
    pub ext: u8,
}

impl SpeedSet {
    pub fn contains(self, s: Speed) -> bool {
        match s.bit() {
            (false, b) => self.base & b != 0,
            (true, b) => self.ext & b != 0,
        }
    }
    pub fn intersect(self, other: SpeedSet) -> SpeedSet {
        SpeedSet {
            base: self.base & other.base,
            ext: self.ext & other.ext,
        }
    }
    pub fn best(self) -> Option<Speed> {
        Speed::ALL.into_iter().rev().find(|s| self.contains(*s))
    }
    pub fn iter(self) -> impl Iterator<Item = Speed> {
        Speed::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_codes() {
        assert_eq!(Width::from_active(2), Some(Width::X4));
        assert_eq!(Width::from_active(16), Some(Width::X2));
        assert_eq!(Width::from_active(3), None);
        assert_eq!(WidthSet(0x1f).best(), Some(Width::X12));
        assert_eq!(WidthSet(3).intersect(WidthSet(2)).best(), Some(Width::X4));
        assert_eq!(Width::parse("4x"), Some(Width::X4));
    }

    #[test]
    fn speed_codes() {
        assert_eq!(Speed::from_active(1, 0), Some(Speed::Sdr));
        assert_eq!(Speed::from_active(4, 4), Some(Speed::Hdr));
        assert_eq!(Speed::from_active(0, 0), None);
        let both = SpeedSet { base: 7, ext: 0x7 };
        assert_eq!(both.best(), Some(Speed::Hdr));
        assert_eq!(
            both.intersect(SpeedSet { base: 7, ext: 0 }).best(),
            Some(Speed::Qdr)
        );
        assert_eq!(Speed::parse("qdr"), Some(Speed::Qdr));
    }
}
