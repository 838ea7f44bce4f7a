//! Link width, lane speed and link rate: what PortInfo encodes (IBA 14.2.5.6
//! LinkWidth*/LinkSpeed*/LinkSpeedExt*/LinkSpeedExt*2, and Mellanox's FDR10 bit), what the SA
//! encodes as a PathRecord rate (IBA 15.2.5.16), and the arithmetic a health check needs.
//! Every generation lives in one table ([`SPEEDS`], [`Width`]'s declaration, [`SA_RATES`]):
//! adding one is one line in each.

use serde::{Deserialize, Serialize};

crate::coded_enum! {
    /// One link width; the code is its LinkWidth* bit (IBA 14.2.5.6).
    pub enum Width: u8 {
        X1 = 1, "1x", "1";
        X2 = 16, "2x", "2";
        X4 = 2, "4x", "4";
        X8 = 4, "8x", "8";
        X12 = 8, "12x", "12";
    }
}

impl Width {
    /// The PortInfo bit for this width (1x=1, 4x=2, 8x=4, 12x=8, 2x=16).
    pub fn bit(self) -> u8 {
        self.code()
    }
    /// Decode LinkWidthActive (exactly one bit set); `None` for 0 or a code no width has.
    pub fn from_active(code: u8) -> Option<Width> {
        Some(Width::from_code(code)).filter(|w| w.is_known())
    }
    /// Lanes: 1, 2, 4, 8 or 12 (0 for an unknown code).
    pub fn lanes(self) -> u32 {
        self.short().parse().unwrap_or(0)
    }
}

/// Which PortInfo field carries a speed's bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpeedField {
    /// LinkSpeedActive/Supported/Enabled (4 bits): SDR, DDR, QDR.
    LinkSpeed,
    /// Mellanox ExtendedPortInfo LinkSpeedActive/Supported/Enabled (vendor SMP 0xFF90):
    /// FDR10, which the standard fields cannot express.
    MellanoxExtended,
    /// LinkSpeedExtActive/Supported/Enabled (IsExtendedSpeedsSupported): FDR..NDR.
    LinkSpeedExt,
    /// LinkSpeedExtActive2/Supported2/Enabled2 (CapabilityMask2 IsExtendedSpeeds2Supported):
    /// XDR.
    LinkSpeedExt2,
}

/// One active lane speed, in rank order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Speed {
    Sdr,
    Ddr,
    Qdr,
    Fdr10,
    Fdr,
    Edr,
    Hdr,
    Ndr,
    Xdr,
}

/// What is known of one lane speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedFacts {
    pub speed: Speed,
    /// As ibnetdiscover and iblinkinfo print it.
    pub name: &'static str,
    pub field: SpeedField,
    /// Its bit in that field.
    pub bit: u8,
    /// Signalling rate of one lane, Gb/s.
    pub lane_gbps: f64,
    /// The rate the specification names the speed by (SA rate codes use it): 10 for QDR
    /// and FDR10, 14 for FDR, 50 for HDR.
    pub lane_nominal_gbps: f64,
    /// Data rate of one lane after line encoding, Gb/s (8b/10b up to QDR, 64b/66b for
    /// FDR10..EDR; HDR and later are PAM4 with FEC, quoted at their nominal rate).
    pub lane_data_gbps: f64,
}

/// Every lane speed, in [`Speed`] order.
pub const SPEEDS: [SpeedFacts; 9] = {
    use SpeedField::*;
    const fn s(
        speed: Speed,
        name: &'static str,
        field: SpeedField,
        bit: u8,
        (lane_gbps, lane_nominal_gbps, lane_data_gbps): (f64, f64, f64),
    ) -> SpeedFacts {
        SpeedFacts {
            speed,
            name,
            field,
            bit,
            lane_gbps,
            lane_nominal_gbps,
            lane_data_gbps,
        }
    }
    [
        s(Speed::Sdr, "SDR", LinkSpeed, 1, (2.5, 2.5, 2.0)),
        s(Speed::Ddr, "DDR", LinkSpeed, 2, (5.0, 5.0, 4.0)),
        s(Speed::Qdr, "QDR", LinkSpeed, 4, (10.0, 10.0, 8.0)),
        s(
            Speed::Fdr10,
            "FDR10",
            MellanoxExtended,
            1,
            (10.3125, 10.0, 10.0),
        ),
        s(
            Speed::Fdr,
            "FDR",
            LinkSpeedExt,
            1,
            (14.0625, 14.0, 13.636_363_636_363_637),
        ),
        s(Speed::Edr, "EDR", LinkSpeedExt, 2, (25.78125, 25.0, 25.0)),
        s(Speed::Hdr, "HDR", LinkSpeedExt, 4, (53.125, 50.0, 50.0)),
        s(Speed::Ndr, "NDR", LinkSpeedExt, 8, (106.25, 100.0, 100.0)),
        s(Speed::Xdr, "XDR", LinkSpeedExt2, 1, (212.5, 200.0, 200.0)),
    ]
};

impl Speed {
    /// Every speed, slowest first.
    pub const ALL: [Speed; 9] = {
        let mut out = [Speed::Sdr; 9];
        let mut i = 0;
        while i < SPEEDS.len() {
            out[i] = SPEEDS[i].speed;
            i += 1;
        }
        out
    };

    pub fn facts(self) -> &'static SpeedFacts {
        &SPEEDS[self as usize]
    }
    /// Signalling rate of one lane in Gb/s.
    pub fn lane_gbps(self) -> f64 {
        self.facts().lane_gbps
    }
    /// Data rate of one lane after line encoding, Gb/s.
    pub fn lane_data_gbps(self) -> f64 {
        self.facts().lane_data_gbps
    }
    pub fn name(self) -> &'static str {
        self.facts().name
    }
    /// The speed whose bit is `code` (exactly one bit) in `field`.
    pub fn from_field(field: SpeedField, code: u8) -> Option<Speed> {
        SPEEDS
            .iter()
            .find(|f| f.field == field && f.bit == code)
            .map(|f| f.speed)
    }
    /// The active speed from PortInfo's active fields, each already 0 where its capability
    /// bit is clear: LinkSpeedExtActive2 wins when set, then LinkSpeedExtActive, then
    /// LinkSpeedActive (as libibnetdisc aggregates them). FDR10 comes from the vendor
    /// attribute: see [`SpeedSet::from_masks`] and the callers that read it.
    pub fn from_active(base: u8, ext: u8, ext2: u8) -> Option<Speed> {
        if ext2 != 0 {
            return Speed::from_field(SpeedField::LinkSpeedExt2, ext2);
        }
        if ext != 0 {
            return Speed::from_field(SpeedField::LinkSpeedExt, ext);
        }
        Speed::from_field(SpeedField::LinkSpeed, base)
    }
    /// Parse "HDR", "hdr" (and "Hdr", as snapshots of schema version 1 wrote it).
    pub fn parse(text: &str) -> Option<Speed> {
        let t = text.trim();
        SPEEDS
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(t))
            .map(|f| f.speed)
    }
}

impl std::fmt::Display for Speed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Speed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Speed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Speed, D::Error> {
        let text = String::deserialize(d)?;
        Speed::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not a lane speed")))
    }
}

/// A set of widths (LinkWidthSupported / LinkWidthEnabled bit mask). JSON: a list of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WidthSet(pub u8);

impl WidthSet {
    pub fn contains(self, w: Width) -> bool {
        self.0 & w.bit() != 0
    }
    pub fn intersect(self, other: WidthSet) -> WidthSet {
        WidthSet(self.0 & other.0)
    }
    pub fn best(self) -> Option<Width> {
        Width::KNOWN
            .iter()
            .rev()
            .copied()
            .find(|w| self.contains(*w))
    }
    pub fn iter(self) -> impl Iterator<Item = Width> {
        Width::KNOWN
            .iter()
            .copied()
            .filter(move |w| self.contains(*w))
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<Width> for WidthSet {
    fn from_iter<I: IntoIterator<Item = Width>>(iter: I) -> Self {
        WidthSet(iter.into_iter().fold(0, |m, w| m | w.bit()))
    }
}

impl Serialize for WidthSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for WidthSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WidthSet, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            /// Schema version 1: the raw mask.
            Mask(u8),
            Names(Vec<Width>),
        }
        Ok(match Repr::deserialize(d)? {
            Repr::Mask(m) => WidthSet(m),
            Repr::Names(v) => v.into_iter().collect(),
        })
    }
}

/// A set of lane speeds, gathered from the PortInfo fields that hold them (one bit per
/// [`Speed`], in rank order). JSON: a list of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SpeedSet(u16);

impl SpeedSet {
    pub const EMPTY: SpeedSet = SpeedSet(0);

    /// From the per-field masks; each must already be 0 where the port's capability bits
    /// say the field means nothing.
    pub fn from_masks(base: u8, fdr10: u8, ext: u8, ext2: u8) -> SpeedSet {
        SPEEDS
            .iter()
            .filter(|f| {
                let mask = match f.field {
                    SpeedField::LinkSpeed => base,
                    SpeedField::MellanoxExtended => fdr10,
                    SpeedField::LinkSpeedExt => ext,
                    SpeedField::LinkSpeedExt2 => ext2,
                };
                mask & f.bit != 0
            })
            .map(|f| f.speed)
            .collect()
    }
    /// The mask of one field (for writing PortInfo-like text).
    pub fn mask(self, field: SpeedField) -> u8 {
        self.iter()
            .map(Speed::facts)
            .filter(|f| f.field == field)
            .fold(0, |m, f| m | f.bit)
    }
    pub fn contains(self, s: Speed) -> bool {
        self.0 & (1 << s as u16) != 0
    }
    pub fn insert(&mut self, s: Speed) {
        self.0 |= 1 << s as u16;
    }
    pub fn intersect(self, other: SpeedSet) -> SpeedSet {
        SpeedSet(self.0 & other.0)
    }
    pub fn best(self) -> Option<Speed> {
        Speed::ALL.into_iter().rev().find(|s| self.contains(*s))
    }
    pub fn iter(self) -> impl Iterator<Item = Speed> {
        Speed::ALL.into_iter().filter(move |s| self.contains(*s))
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<Speed> for SpeedSet {
    fn from_iter<I: IntoIterator<Item = Speed>>(iter: I) -> Self {
        let mut set = SpeedSet::EMPTY;
        for s in iter {
            set.insert(s);
        }
        set
    }
}

impl Serialize for SpeedSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for SpeedSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SpeedSet, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            /// Schema version 1: `{"base": mask, "ext": mask}`.
            Masks {
                base: u8,
                ext: u8,
            },
            Names(Vec<Speed>),
        }
        Ok(match Repr::deserialize(d)? {
            Repr::Masks { base, ext } => SpeedSet::from_masks(base, 0, ext, 0),
            Repr::Names(v) => v.into_iter().collect(),
        })
    }
}

/// A link rate: lanes times lane speed, written `4xHDR` as ibnetdiscover writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rate {
    pub width: Width,
    pub speed: Speed,
}

impl Rate {
    pub fn new(width: Width, speed: Speed) -> Rate {
        Rate { width, speed }
    }
    /// Parse `4xHDR` (any case; `4XHDR`, `4xFDR10` too).
    pub fn parse(text: &str) -> Option<Rate> {
        let t = text.trim();
        let i = t.find(['x', 'X'])?;
        Some(Rate {
            width: Width::parse(&t[..i]).filter(|w| w.is_known())?,
            speed: Speed::parse(&t[i + 1..])?,
        })
    }
    /// Whatever of a width and a speed is known: `4xHDR`, `4x?`, `?xHDR`, or `?` when
    /// neither is: the one text form of a rate everywhere ibscope prints one.
    pub fn text(width: Option<Width>, speed: Option<Speed>) -> String {
        match (width, speed) {
            (None, None) => "?".into(),
            (w, s) => format!(
                "{}x{}",
                w.map_or_else(|| "?".into(), |w| w.lanes().to_string()),
                s.map_or("?", Speed::name)
            ),
        }
    }
    /// The text of a rate that may not be known: `4xHDR`, or `?`.
    pub fn text_of(rate: Option<Rate>) -> String {
        Rate::text(rate.map(|r| r.width), rate.map(|r| r.speed))
    }
    /// Signalling rate in Gb/s (lanes × lane rate).
    pub fn signal_gbps(self) -> f64 {
        f64::from(self.width.lanes()) * self.speed.lane_gbps()
    }
    /// Data rate in Gb/s (after line encoding).
    pub fn data_gbps(self) -> f64 {
        f64::from(self.width.lanes()) * self.speed.lane_data_gbps()
    }
    /// Lower than `norm` in width or in speed.
    pub fn is_below(self, norm: Rate) -> bool {
        self.width < norm.width || self.speed < norm.speed
    }
    /// The lower of two rates the ends of one link report: each part the lesser.
    pub fn lesser(self, other: Rate) -> Rate {
        Rate {
            width: self.width.min(other.width),
            speed: self.speed.min(other.speed),
        }
    }
    /// Nominal rate in Gb/s (lanes × the speed's nominal lane rate: 40 for 4xQDR).
    pub fn nominal_gbps(self) -> f64 {
        f64::from(self.width.lanes()) * self.speed.facts().lane_nominal_gbps
    }
    /// The SA rate code (PathRecord Rate, IBA 15.2.5.16) of this rate's nominal rate, if
    /// the table has one.
    pub fn sa_code(self) -> Option<u8> {
        let gbps = self.nominal_gbps();
        SA_RATES
            .iter()
            .find(|(_, g)| (g - gbps).abs() < 0.01)
            .map(|(c, _)| *c)
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&Rate::text(Some(self.width), Some(self.speed)))
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        let text = String::deserialize(d)?;
        Rate::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not a rate like 4xHDR")))
    }
}

/// SA rate codes (PathRecord/MultiPathRecord Rate; IBA 15.2.5.16, and rdma-core's
/// IB_PATH_RECORD_RATE_*) and the nominal rate each stands for, Gb/s.
pub const SA_RATES: [(u8, f64); 23] = [
    (2, 2.5),
    (3, 10.0),
    (4, 30.0),
    (5, 5.0),
    (6, 20.0),
    (7, 40.0),
    (8, 60.0),
    (9, 80.0),
    (10, 120.0),
    (11, 14.0),
    (12, 56.0),
    (13, 112.0),
    (14, 168.0),
    (15, 25.0),
    (16, 100.0),
    (17, 200.0),
    (18, 300.0),
    (19, 28.0),
    (20, 50.0),
    (21, 400.0),
    (22, 600.0),
    (23, 800.0),
    (24, 1200.0),
];

/// Gb/s of an SA rate code; `None` for codes the table does not hold (0, 1, 25..63).
pub fn sa_rate_gbps(code: u8) -> Option<f64> {
    SA_RATES.iter().find(|(c, _)| *c == code).map(|(_, g)| *g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_codes() {
        assert_eq!(Width::from_active(2), Some(Width::X4));
        assert_eq!(Width::from_active(16), Some(Width::X2));
        assert_eq!(Width::from_active(3), None);
        assert_eq!(Width::from_active(0), None);
        assert_eq!(WidthSet(0x1f).best(), Some(Width::X12));
        assert_eq!(WidthSet(3).intersect(WidthSet(2)).best(), Some(Width::X4));
        assert_eq!(Width::parse("4x"), Some(Width::X4));
        assert_eq!(Width::parse("4X"), Some(Width::X4));
        assert_eq!(Width::parse("12"), Some(Width::X12));
        assert_eq!(Width::X12.lanes(), 12);
        assert!(Width::X2 < Width::X4 && Width::X8 < Width::X12);
        assert_eq!(
            serde_json::to_string(&WidthSet(0x1f)).unwrap(),
            r#"["1x","2x","4x","8x","12x"]"#
        );
        assert_eq!(
            serde_json::from_str::<WidthSet>("3").unwrap(),
            serde_json::from_str::<WidthSet>(r#"["1x","4x"]"#).unwrap()
        );
    }

    #[test]
    fn speed_table_is_in_rank_order() {
        for (i, f) in SPEEDS.iter().enumerate() {
            assert_eq!(f.speed as usize, i, "{}", f.name);
            assert_eq!(Speed::parse(f.name), Some(f.speed));
            if i > 0 {
                assert!(
                    f.lane_data_gbps > SPEEDS[i - 1].lane_data_gbps,
                    "{}",
                    f.name
                );
            }
        }
    }

    #[test]
    fn speed_codes() {
        assert_eq!(Speed::from_active(1, 0, 0), Some(Speed::Sdr));
        assert_eq!(Speed::from_active(4, 4, 0), Some(Speed::Hdr));
        assert_eq!(Speed::from_active(4, 8, 1), Some(Speed::Xdr));
        assert_eq!(Speed::from_active(0, 8, 0), Some(Speed::Ndr));
        assert_eq!(Speed::from_active(0, 0, 0), None);
        assert_eq!(Speed::from_active(3, 0, 0), None);
        let both = SpeedSet::from_masks(7, 0, 7, 0);
        assert_eq!(both.best(), Some(Speed::Hdr));
        assert_eq!(
            both.intersect(SpeedSet::from_masks(7, 0, 0, 0)).best(),
            Some(Speed::Qdr)
        );
        let fdr10 = SpeedSet::from_masks(7, 1, 0, 0);
        assert_eq!(fdr10.best(), Some(Speed::Fdr10));
        assert_eq!(fdr10.mask(SpeedField::LinkSpeed), 7);
        assert_eq!(fdr10.mask(SpeedField::MellanoxExtended), 1);
        assert_eq!(Speed::parse("qdr"), Some(Speed::Qdr));
        assert_eq!(Speed::parse("Hdr"), Some(Speed::Hdr));
        assert_eq!(Speed::parse("fdr10"), Some(Speed::Fdr10));
        assert_eq!(
            serde_json::to_string(&SpeedSet::from_masks(1, 0, 8, 1)).unwrap(),
            r#"["SDR","NDR","XDR"]"#
        );
        assert_eq!(
            serde_json::from_str::<SpeedSet>(r#"{"base":7,"ext":4}"#).unwrap(),
            SpeedSet::from_masks(7, 0, 4, 0)
        );
    }

    #[test]
    fn rates() {
        let r = Rate::parse("4xHDR").unwrap();
        assert_eq!(r.to_string(), "4xHDR");
        assert_eq!(Rate::text_of(Some(r)), "4xHDR");
        assert_eq!(Rate::text_of(None), "?");
        assert_eq!(Rate::parse("1XEDR").unwrap().to_string(), "1xEDR");
        assert_eq!(Rate::parse("4xFDR10").unwrap().speed, Speed::Fdr10);
        assert_eq!(Rate::parse("1xXDR").unwrap().data_gbps(), 200.0);
        assert!(Rate::parse("4xZDR").is_none());
        assert!(Rate::parse("3xHDR").is_none());
        assert!(Rate::parse("HDR").is_none());
        assert!(Rate::parse("1xHDR").unwrap().is_below(r));
        assert!(Rate::parse("4xEDR").unwrap().is_below(r));
        assert!(!r.is_below(r));
        assert_eq!(
            Rate::parse("4xNDR")
                .unwrap()
                .lesser(Rate::parse("1xXDR").unwrap()),
            Rate::parse("1xNDR").unwrap()
        );
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"4xHDR\"");
        assert_eq!(Rate::text(Some(Width::X4), None), "4x?");
        assert_eq!(Rate::text(None, None), "?");
    }

    #[test]
    fn sa_rate_codes() {
        assert_eq!(sa_rate_gbps(3), Some(10.0));
        assert_eq!(sa_rate_gbps(23), Some(800.0));
        assert_eq!(sa_rate_gbps(24), Some(1200.0));
        assert_eq!(sa_rate_gbps(25), None);
        assert_eq!(Rate::parse("4xSDR").unwrap().sa_code(), Some(3));
        assert_eq!(Rate::parse("4xQDR").unwrap().sa_code(), Some(7));
        assert_eq!(Rate::parse("4xFDR").unwrap().sa_code(), Some(12));
        assert_eq!(Rate::parse("4xHDR").unwrap().sa_code(), Some(17));
        assert_eq!(Rate::parse("4xNDR").unwrap().sa_code(), Some(21));
        assert_eq!(Rate::parse("4xXDR").unwrap().sa_code(), Some(23));
    }
}
