//! The cable findings: a decoded module judged against its own thresholds and flags, and
//! against the rate of the link it carries. `check`, the TUI, `serve` and `ibscope cables`
//! show these; the kinds are lines of `FINDING_KINDS`, lane rates `SPEEDS`'.
//!
//! What is never judged, because it would be a false finding: light, LOS and LOL on passive
//! copper (it reports states it does not have while the link is Active); anything but the
//! checksum itself when the identity page fails its checksum (its media type and thresholds
//! may be another page's bytes); the rate where the module declares none.

use ibscope_mad::attr::link::Speed;
use ibscope_mad::cable::model::{Alarms, Bounds};
use ibscope_mad::cable::{rates, Media, Module};

use crate::cable_reads::{FabricModules, ModuleRead, PortModule};
use crate::finding_kinds::{Evidence, Finding, FindingKind};
use crate::model::refs::PortRef;

/// Where a module sits, for its findings: the port and its peer, the link's lane speed
/// when it is up, and the file line it was read from when it came from a file.
#[derive(Debug, Clone, Default)]
pub struct ModuleContext {
    pub at: Option<PortRef>,
    pub remote: Option<PortRef>,
    /// The active lane speed of the link, if the link is up.
    pub link_speed: Option<Speed>,
    /// The module lanes (from 1) the port uses, where a module is split between ports;
    /// empty: all of them. Another port's lanes are that port's findings.
    pub lanes: Vec<u8>,
    pub evidence: Vec<Evidence>,
}

impl ModuleContext {
    /// Whether lane `lane` of the module is this port's.
    fn has_lane(&self, lane: u8) -> bool {
        self.lanes.is_empty() || self.lanes.contains(&lane)
    }
}

/// The context of a port whose module was read over the fabric.
pub fn port_context(p: &PortModule) -> ModuleContext {
    ModuleContext {
        at: Some(p.at.clone()),
        remote: p.remote.clone(),
        link_speed: p.link_speed,
        lanes: match &p.read {
            ModuleRead::Read { lanes, .. } => lanes.clone(),
            _ => Vec::new(),
        },
        evidence: Vec::new(),
    }
}

/// Every port's module decoded (or why not) with its findings, in the order read.
pub fn judge(modules: &FabricModules) -> Vec<(&PortModule, Result<Module, String>, Vec<Finding>)> {
    modules
        .ports
        .iter()
        .filter_map(|p| match &p.read {
            ModuleRead::Read { memory, .. } => Some(match ibscope_mad::cable::decode(memory) {
                Ok(m) => {
                    let found = module_findings(&m, &port_context(p));
                    (p, Ok(m), found)
                }
                Err(e) => (p, Err(e.to_string()), Vec::new()),
            }),
            _ => None,
        })
        .collect()
}

/// Every cable finding of the modules read over a fabric.
pub fn fabric_cable_findings(modules: &FabricModules) -> Vec<Finding> {
    judge(modules).into_iter().flat_map(|(_, _, f)| f).collect()
}

/// Every finding about one module.
pub fn module_findings(module: &Module, ctx: &ModuleContext) -> Vec<Finding> {
    let mut out = Vec::new();
    let who = who(module);
    let failed: Vec<String> = module
        .checksums
        .iter()
        .filter(|c| !c.ok())
        .map(|c| {
            format!(
                "{} (bytes {}) stored 0x{:02x}, computed 0x{:02x}",
                c.name, c.covers, c.stored, c.computed
            )
        })
        .collect();
    if !failed.is_empty() {
        out.push(Finding::new(
            FindingKind::CableChecksum,
            format!("{who}: checksum failed: {}", failed.join("; ")),
        ));
        return out.into_iter().map(|f| placed(f, ctx)).collect();
    }
    light(module, ctx, &who, &mut out);
    states(module, ctx, &who, &mut out);
    temperature(module, &who, &mut out);
    if let (Some(speed), Some(module_gbps)) = (ctx.link_speed, module.max_lane_gbps) {
        let facts = speed.facts();
        if rates::too_slow(module_gbps, facts.lane_gbps) {
            out.push(Finding::new(
                FindingKind::CableRateMismatch,
                format!(
                    "{who}: rated for {module_gbps} Gb/s per lane, the link runs {} ({} Gb/s \
                     per lane)",
                    facts.name, facts.lane_gbps
                ),
            ));
        }
    }
    out.into_iter().map(|f| placed(f, ctx)).collect()
}

fn placed(mut f: Finding, ctx: &ModuleContext) -> Finding {
    if let Some(at) = &ctx.at {
        f = f.at(at.clone(), ctx.remote.clone());
    }
    f.evidence = ctx.evidence.clone();
    f
}

/// "vendor part number SN serial": how a finding names the module to replace.
pub fn who(module: &Module) -> String {
    let id = &module.identity;
    format!("{} {} SN {}", id.vendor, id.part_number, id.serial)
        .trim()
        .to_string()
}

/// Whether a module's light means something: an optical module, or one whose media is not
/// said but that has power thresholds of its own.
pub fn carries_light(module: &Module) -> bool {
    module.media.is_optical()
        || (module.media == Media::Unknown
            && module
                .thresholds
                .as_ref()
                .is_some_and(|t| t.rx_power_mw.low_warning > 0.0))
}

fn dbm(mw: f64) -> String {
    match ibscope_mad::cable::model::units::dbm(mw) {
        Some(d) => format!("{mw:.4} mW ({d:.2} dBm)"),
        None => format!("{mw:.4} mW (no light)"),
    }
}

/// Low against the module's own low warning threshold, or its low flags.
fn low(value: Option<f64>, bounds: Option<&Bounds>, flags: Option<&Alarms>) -> Option<String> {
    if let (Some(v), Some(b)) = (value, bounds) {
        if b.low_warning > 0.0 && v < b.low_warning {
            let level = if v < b.low_alarm { "alarm" } else { "warning" };
            return Some(format!(
                "{} is below its low {level} threshold {}",
                dbm(v),
                dbm(if level == "alarm" {
                    b.low_alarm
                } else {
                    b.low_warning
                })
            ));
        }
    }
    match flags {
        Some(f) if f.low_alarm => Some(format!("{} raises its low alarm flag", opt_dbm(value))),
        Some(f) if f.low_warning => Some(format!("{} raises its low warning flag", opt_dbm(value))),
        _ => None,
    }
}

fn opt_dbm(v: Option<f64>) -> String {
    v.map_or_else(|| "power".to_string(), dbm)
}

fn light(module: &Module, ctx: &ModuleContext, who: &str, out: &mut Vec<Finding>) {
    if !carries_light(module) {
        return;
    }
    let Some(diag) = &module.diagnostics else {
        return;
    };
    let t = module.thresholds.as_ref();
    for lane in diag.lanes.iter().filter(|l| ctx.has_lane(l.lane)) {
        let flags = module.flags.lanes.iter().find(|f| f.lane == lane.lane);
        if let Some(why) = low(
            lane.rx_power_mw,
            t.map(|t| &t.rx_power_mw),
            flags.and_then(|f| f.rx_power.as_ref()),
        ) {
            out.push(Finding::new(
                FindingKind::CableRxPowerLow,
                format!("{who}: lane {} receive power {why}", lane.lane),
            ));
        }
        if let Some(why) = low(
            lane.tx_power_mw,
            t.map(|t| &t.tx_power_mw),
            flags.and_then(|f| f.tx_power.as_ref()),
        ) {
            out.push(Finding::new(
                FindingKind::CableTxPowerLow,
                format!("{who}: lane {} transmit power {why}", lane.lane),
            ));
        }
    }
}

fn states(module: &Module, ctx: &ModuleContext, who: &str, out: &mut Vec<Finding>) {
    if matches!(module.media, Media::PassiveCopper) {
        return;
    }
    let latched = if module.flags.latched {
        " (latched)"
    } else {
        ""
    };
    for f in module.flags.lanes.iter().filter(|f| ctx.has_lane(f.lane)) {
        let lane = f.lane;
        if f.tx_fault == Some(true) {
            out.push(Finding::new(
                FindingKind::CableTxFault,
                format!("{who}: lane {lane} reports a transmitter fault{latched}"),
            ));
        }
        if f.rx_los == Some(true) {
            out.push(Finding::new(
                FindingKind::CableLos,
                format!("{who}: lane {lane} reports loss of signal on receive{latched}"),
            ));
        }
        let lol: Vec<&str> = [(f.rx_lol, "receive"), (f.tx_lol, "transmit")]
            .iter()
            .filter(|(s, _)| *s == Some(true))
            .map(|(_, side)| *side)
            .collect();
        if !lol.is_empty() {
            out.push(Finding::new(
                FindingKind::CableLol,
                format!(
                    "{who}: lane {lane} reports loss of lock on {}{latched}",
                    lol.join(" and ")
                ),
            ));
        }
    }
}

fn temperature(module: &Module, who: &str, out: &mut Vec<Finding>) {
    let value = module.diagnostics.as_ref().and_then(|d| d.temperature_c);
    let bounds = module.thresholds.as_ref().map(|t| &t.temperature_c);
    let why = match (value, bounds) {
        (Some(v), Some(b)) if b.high_warning > 0.0 && v > b.high_warning => {
            let (level, limit) = if v > b.high_alarm {
                ("alarm", b.high_alarm)
            } else {
                ("warning", b.high_warning)
            };
            Some(format!(
                "{v:.1} °C is above its high {level} threshold {limit:.1} °C"
            ))
        }
        _ => match module.flags.temperature {
            Some(f) if f.high_alarm || f.high_warning => Some(format!(
                "{} raises its high temperature flag",
                value.map_or_else(|| "it".to_string(), |v| format!("{v:.1} °C"))
            )),
            _ => None,
        },
    };
    if let Some(why) = why {
        out.push(Finding::new(
            FindingKind::CableTemperature,
            format!("{who}: {why}"),
        ));
    }
}
