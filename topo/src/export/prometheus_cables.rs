//! The ibscope_cable_* families of `serve --cables`: each port's module as last read, its
//! live values in base units (per lane where the map has lanes: only the port's own lanes
//! of a split module; light and bias only of modules that carry light, temperature and
//! voltage not of passive copper, which monitors neither), the module's own warning
//! thresholds the alerts compare against, its lane flags, and its cable findings by kind. A port the page does not carry (the
//! port filter) has none; a module that was not read has none but counts in
//! `ibscope_cable_modules`.

use std::fmt::Write;

use ibscope_mad::cable::{Media, Module};

use super::prometheus_labels::PageLabels;
use super::prometheus_text::PageText;
use crate::cable_reads::{FabricModules, ModuleRead};
use crate::cables::{carries_light, judge};
use crate::escape::for_prometheus_label;
use crate::findings::Finding;

/// A module read, with its port's labels and lanes.
struct Row<'a> {
    labels: &'a str,
    module: Module,
    /// The module lanes the port uses; empty: all.
    lanes: Vec<u8>,
    findings: Vec<Finding>,
}

impl Row<'_> {
    fn has_lane(&self, lane: u8) -> bool {
        self.lanes.is_empty() || self.lanes.contains(&lane)
    }
}

/// A per-module gauge: its name, HELP and value.
type ModuleValue = (&'static str, &'static str, fn(&Module) -> Option<f64>);

const MODULE_VALUES: [ModuleValue; 4] = [
    (
        "ibscope_cable_temperature_celsius",
        "The module's temperature.",
        |m| m.diagnostics.as_ref().and_then(|d| d.temperature_c),
    ),
    (
        "ibscope_cable_supply_voltage_volts",
        "The module's supply voltage.",
        |m| m.diagnostics.as_ref().and_then(|d| d.voltage_v),
    ),
    (
        "ibscope_cable_temperature_high_warning_celsius",
        "The module's own high temperature warning threshold.",
        |m| m.thresholds.as_ref().map(|t| t.temperature_c.high_warning),
    ),
    (
        "ibscope_cable_rx_power_low_warning_watts",
        "The module's own low receive power warning threshold (what a lane's ibscope_cable_rx_power_watts is judged against).",
        |m| m.thresholds.as_ref().map(|t| t.rx_power_mw.low_warning / 1000.0),
    ),
];

/// A per-lane gauge: its name, HELP and value (in base units).
type LaneValue = (
    &'static str,
    &'static str,
    fn(&ibscope_mad::cable::model::LaneMonitor) -> Option<f64>,
);

const LANE_VALUES: [LaneValue; 3] = [
    (
        "ibscope_cable_rx_power_watts",
        "Optical power a lane receives (average or OMA, as the module measures it).",
        |l| l.rx_power_mw.map(|mw| mw / 1000.0),
    ),
    (
        "ibscope_cable_tx_power_watts",
        "Optical power a lane transmits.",
        |l| l.tx_power_mw.map(|mw| mw / 1000.0),
    ),
    (
        "ibscope_cable_tx_bias_amperes",
        "A lane's laser bias current.",
        |l| l.bias_ma.map(|ma| ma / 1000.0),
    ),
];

fn number(out: &mut PageText<'_>, text: &mut String, name: &str, labels: &str, v: f64) {
    text.clear();
    let _ = write!(text, "{v}");
    out.sample_text(name, labels, text);
}

/// Every ibscope_cable_* family of `modules`.
pub(super) fn cable_families(out: &mut PageText<'_>, labels: &PageLabels, modules: &FabricModules) {
    let rows: Vec<Row<'_>> = judge(modules)
        .into_iter()
        .filter_map(|(p, module, findings)| {
            let row = labels.row_of(p.at.key())?;
            let lanes = match &p.read {
                ModuleRead::Read { lanes, .. } => lanes.clone(),
                _ => Vec::new(),
            };
            Some(Row {
                labels: labels.row(row),
                module: module.ok()?,
                lanes,
                findings,
            })
        })
        .collect();
    states_family(out, &labels.prefix, modules);
    info_family(out, &rows);
    let mut text = String::new();
    for (name, help, value) in MODULE_VALUES {
        out.head(name, "gauge", help);
        for r in rows
            .iter()
            .filter(|r| r.module.media != Media::PassiveCopper)
        {
            if let Some(v) = value(&r.module) {
                number(out, &mut text, name, r.labels, v);
            }
        }
    }
    let mut lane_labels = String::new();
    for (name, help, value) in LANE_VALUES {
        out.head(name, "gauge", help);
        for r in rows.iter().filter(|r| carries_light(&r.module)) {
            let lanes = r.module.diagnostics.iter().flat_map(|d| &d.lanes);
            for l in lanes.filter(|l| r.has_lane(l.lane)) {
                if let Some(v) = value(l) {
                    lane_labels.clear();
                    let _ = write!(lane_labels, "{},lane=\"{}\"", r.labels, l.lane);
                    number(out, &mut text, name, &lane_labels, v);
                }
            }
        }
    }
    flags_family(out, &rows);
    findings_family(out, &rows);
}

fn states_family(out: &mut PageText<'_>, prefix: &str, modules: &FabricModules) {
    let name = "ibscope_cable_modules";
    out.head(
        name,
        "gauge",
        "The fabric's ports by how their module read went at the last read: read, empty (no module in the cage), not_read (the port's line in `ibscope cables --access-register` says why).",
    );
    let c = modules.counts();
    let states: [(&str, usize); 3] = [
        ("read", c.read),
        ("empty", c.empty),
        ("not_read", c.not_read),
    ];
    for (state, n) in states {
        out.sample(name, &format!("{prefix},state=\"{state}\""), n as u64);
    }
}

fn info_family(out: &mut PageText<'_>, rows: &[Row<'_>]) {
    let name = "ibscope_cable_info";
    out.head(
        name,
        "gauge",
        "One per module read; what it is are labels (join on the port's labels to name a module in an alert).",
    );
    for r in rows {
        let id = &r.module.identity;
        let labels = format!(
            "{},identifier=\"{}\",vendor=\"{}\",part_number=\"{}\",serial=\"{}\",media=\"{}\"",
            r.labels,
            r.module.identifier.short(),
            for_prometheus_label(&id.vendor),
            for_prometheus_label(&id.part_number),
            for_prometheus_label(&id.serial),
            r.module.media.name()
        );
        out.sample(name, &labels, 1);
    }
}

fn flags_family(out: &mut PageText<'_>, rows: &[Row<'_>]) {
    let name = "ibscope_cable_lane_flag";
    out.head(
        name,
        "gauge",
        "A lane flag the module reports (1 raised): rx_los, tx_los, rx_lol, tx_lol, tx_fault; latched on SFF-8636 and CMIS modules. Passive copper reports LOS/LOL it does not have: judge those by ibscope_findings, which leaves them out.",
    );
    let mut labels = String::new();
    for r in rows {
        for f in r.module.flags.lanes.iter().filter(|f| r.has_lane(f.lane)) {
            for (flag, state) in f.states() {
                if let Some(on) = state {
                    labels.clear();
                    let _ = write!(labels, "{},lane=\"{}\",flag=\"{flag}\"", r.labels, f.lane);
                    out.sample(name, &labels, u64::from(on));
                }
            }
        }
    }
}

fn findings_family(out: &mut PageText<'_>, rows: &[Row<'_>]) {
    let name = "ibscope_cable_findings";
    out.head(
        name,
        "gauge",
        "The cable findings of a port's module at the last read, by kind (`finding`: the port's labels have a node `kind`), only the kinds it has.",
    );
    for r in rows {
        let mut kinds: Vec<_> = r.findings.iter().map(|f| f.kind).collect();
        kinds.sort();
        kinds.dedup();
        for kind in kinds {
            let n = r.findings.iter().filter(|f| f.kind == kind).count();
            let labels = format!(
                "{},finding=\"{kind}\",severity=\"{}\"",
                r.labels,
                kind.severity().as_str()
            );
            out.sample(name, &labels, n as u64);
        }
    }
}
