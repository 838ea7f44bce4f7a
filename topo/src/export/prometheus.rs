//! The Prometheus text exposition (format 0.0.4): the counter page of
//! `ibscope counters --format prom` ([`counters_page`]) and the whole page `ibscope serve`
//! publishes after each sweep ([`write_fabric_page`]). Both name a counter the same way
//! ([`metric_name`]) and write its family with the same code; label values are escaped
//! with [`escape::for_prometheus_label`].
//!
//! Samples are written straight into the page (no per-family list of label copies): at
//! 16k ports and 40 series each, rendering is most of a sweep's CPU time.

use std::collections::HashMap;
use std::fmt::Write;
use std::io;

use ibscope_mad::attr::{CounterName, PhysState, PortState};

use super::prometheus_text::{family_head, sample_line, PageText};
use crate::cable_reads::FabricModules;
use crate::counters::{self, PortSample, Sample, Thresholds};
use crate::escape::for_prometheus_label;
use crate::findings::{self, Finding};
use crate::health::HealthReport;
use crate::hosts::Hosts;
use crate::model::{Fabric, Port};
use crate::namemap::NameMap;

pub use super::prometheus_labels::{fabric_label, PageLabels, PortFilter};

/// Prometheus metric name of a counter: `ibscope_port_<snake>_total`, data ones
/// `ibscope_port_xmit_data_bytes_total`.
pub fn metric_name(counter: &str) -> String {
    let base = heck::AsSnakeCase(counter).to_string();
    let base = base.strip_prefix("port_").unwrap_or(&base);
    // promtool rejects counter names containing "counter": SymbolErrorCounter becomes
    // ibscope_port_symbol_error_total.
    let base = base.strip_suffix("_counter").unwrap_or(base).to_string();
    if counters::is_data_counter(counter) {
        format!("ibscope_port_{base}_bytes_total")
    } else {
        format!("ibscope_port_{base}_total")
    }
}

/// HELP text of a gauge that holds a coded value: "PortState (1 Down, 2 Initialize, ...;
/// 0 not read)", from the value's table.
fn code_help<'a>(what: &str, codes: impl Iterator<Item = (u8, &'a str)>) -> String {
    let known: Vec<String> = codes
        .filter(|(c, _)| *c != 0)
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    format!("{what} ({}; 0 not read).", known.join(", "))
}

/// Where a breakdown counter comes from, for its HELP text: "(PMA PortRcvErrorDetails,
/// where PortRcvErrors counted)".
fn breakdown_source(name: &str) -> Option<String> {
    ibscope_mad::attr::perf_attrs::BREAKDOWNS
        .iter()
        .find(|b| b.fields.iter().any(|f| f.name == name))
        .map(|b| format!("(PMA {}, where {} counted)", b.attribute, b.explains))
}

/// One family per counter of `names`: the best value (64-bit where implemented, data in
/// bytes) of every port of `ports` that has one. `source` ends the HELP text (a breakdown
/// counter's says which attribute it is from).
fn counter_families<L: AsRef<str>>(
    out: &mut PageText<'_>,
    names: &[&str],
    source: &str,
    ports: &[(&PortSample, L)],
) {
    let best = BestValues::new(names, ports);
    for (k, &name) in names.iter().enumerate() {
        let metric = metric_name(name);
        let unit = if counters::is_data_counter(name) {
            " in bytes"
        } else {
            ""
        };
        let source = breakdown_source(name).unwrap_or_else(|| source.to_string());
        let help = format!("IB {name}{unit} {source}.");
        out.head(&metric, "counter", &help);
        for (i, (_, labels)) in ports.iter().enumerate() {
            if let Some(v) = best.value(k, i) {
                out.sample(&metric, labels.as_ref(), v);
            }
        }
    }
}

/// The best value of each counter of a page for each port (the one
/// [`PortSample::value`] gives): found in one pass over each port's readings instead of a
/// search by name per counter and port, and laid out in the order the page is written (a
/// counter's family, then the next), counter `k` of port `i` at `k * ports + i`.
struct BestValues {
    ports: usize,
    values: Vec<u64>,
    /// Which of `values` are there (an `Option<u64>` each would take twice the memory).
    have: Vec<bool>,
}

impl BestValues {
    fn new<L>(names: &[&str], ports: &[(&PortSample, L)]) -> BestValues {
        // Each counter's place on the page by its row in the PMA tables.
        let mut on_page = vec![None; CounterName::table_names().len()];
        for (k, name) in names.iter().enumerate() {
            if let Some(row) = CounterName::intern(name).table_row() {
                on_page[row] = Some(k);
            }
        }
        let mut values = vec![0; names.len() * ports.len()];
        let mut have = vec![false; values.len()];
        for (i, (p, _)) in ports.iter().enumerate() {
            // In PortSample::reading's order: the first reading of a counter is its best.
            let sets = (p.extended.iter().chain(&p.counters))
                .chain(p.details.0.iter().map(|(_, set)| set));
            for r in sets.flat_map(|set| set.readings()) {
                let Some(k) = r.name.table_row().and_then(|row| on_page[row]) else {
                    continue;
                };
                let at = k * ports.len() + i;
                if !have[at] {
                    (values[at], have[at]) = (r.value, true);
                }
            }
        }
        BestValues {
            ports: ports.len(),
            values,
            have,
        }
    }

    /// Counter `k` of port `i`, if it has one.
    fn value(&self, k: usize, i: usize) -> Option<u64> {
        let at = k * self.ports + i;
        self.have[at].then_some(self.values[at])
    }
}

/// The page of `ibscope counters --format prom`: every counter of every port of each
/// fabric's sample, labelled by fabric, node name, node GUID, LID and port; the breakdown
/// counters too when a sample has them.
pub fn counters_page(samples: &[(&str, &Sample)]) -> String {
    let ports: Vec<(&PortSample, String)> = samples
        .iter()
        .flat_map(|(fabric, sample)| {
            let fabric = fabric_label(fabric);
            sample.ports.iter().map(move |p| {
                let labels = format!(
                    "{fabric},node=\"{}\",node_guid=\"{:#018x}\",lid=\"{}\",port=\"{}\"",
                    for_prometheus_label(&p.at.node.name),
                    p.at.node.guid,
                    p.at.lid,
                    p.at.port
                );
                (p, labels)
            })
        })
        .collect();
    let mut names = counters::all_counter_names();
    if ports.iter().any(|(p, _)| !p.details.is_empty()) {
        names.extend(counters::detail_counter_names());
    }
    let mut text = Vec::new();
    let mut out = PageText::new(&mut text);
    counter_families(&mut out, &names, "(PMA)", &ports);
    // Into memory, and all of it text: neither can fail.
    let _ = out.finish();
    String::from_utf8(text).unwrap_or_default()
}

/// Where `serve` stands with one fabric, as of one scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FabricStatus<'a> {
    /// The fabric's name (its `fabric` label).
    pub name: &'a str,
    /// Its last sweep succeeded, is fresh, and its port is open (as /healthz says).
    pub up: bool,
    /// Its series are not from a current sweep: the fabric is unreachable (they are the
    /// last good sample), or its last sweep is older than the freshness limit.
    pub stale: bool,
    /// Seconds since the sweep behind its series finished; `None` before the first.
    pub age_seconds: Option<f64>,
    /// Times its management port was opened again after it was lost.
    pub reopens: u64,
}

/// The families `serve` appends to its cached pages on every scrape, one sample per
/// fabric: the age of its last sweep (for those with a page), whether it is up, whether
/// its series are stale, and how often its port was reopened.
pub fn scrape_families(fabrics: &[FabricStatus<'_>]) -> String {
    type Value = fn(&FabricStatus<'_>) -> Option<String>;
    let families: [(&str, &str, &str, Value); 4] = [
        (
            "ibscope_sweep_age_seconds",
            "gauge",
            "Seconds since the last sweep finished.",
            |f| f.age_seconds.map(|s| format!("{s:.3}")),
        ),
        (
            "ibscope_up",
            "gauge",
            "1 if the fabric's port is open and its last sweep succeeded and is fresh (as \
             /healthz says), else 0: its port could not be opened, the connection to it was \
             lost (its series are then the last good sample), or its sweeps stopped.",
            |f| Some(u8::from(f.up).to_string()),
        ),
        (
            "ibscope_sample_stale",
            "gauge",
            "1 when the fabric's series are not from a current sweep: the fabric is \
             unreachable, or its last sweep is older than the freshness limit (3 intervals + \
             5 s).",
            |f| Some(u8::from(f.stale).to_string()),
        ),
        (
            "ibscope_port_reopens_total",
            "counter",
            "Times the fabric's management port was opened again after it became unreachable.",
            |f| Some(f.reopens.to_string()),
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in families {
        family_head(&mut out, name, kind, help);
        for f in fabrics {
            if let Some(value) = value(f) {
                sample_line(&mut out, name, &fabric_label(f.name), &value);
            }
        }
    }
    out
}

/// A page cut into its families (each `# HELP` line starts one): the head (HELP and TYPE
/// lines) and the samples. `serve` merges the pages of several fabrics family by family,
/// since a family's samples must stand together under one head.
pub fn split_families(page: &str) -> Vec<(&str, &str, &str)> {
    let mut starts: Vec<usize> = page
        .match_indices("# HELP ")
        .filter(|(i, _)| *i == 0 || page.as_bytes()[i - 1] == b'\n')
        .map(|(i, _)| i)
        .collect();
    starts.push(page.len());
    starts
        .windows(2)
        .map(|w| {
            let family = &page[w[0]..w[1]];
            let name = family["# HELP ".len()..]
                .split(' ')
                .next()
                .unwrap_or_default();
            // HELP and TYPE: the first two lines.
            let head_end = family
                .match_indices('\n')
                .nth(1)
                .map_or(family.len(), |(i, _)| i + 1);
            (name, &family[..head_end], &family[head_end..])
        })
        .collect()
}

/// Cumulative PMA query failures of one node.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScrapeErrors {
    pub errors: u64,
    pub timeouts: u64,
}

/// What goes on the fabric page besides the fabric and the sweep: the exporter's own
/// numbers, the counter families and what the findings are judged by.
#[derive(Debug, Clone, Copy)]
pub struct PageStats<'a> {
    /// Counter families on the page.
    pub counters: &'a [&'static str],
    pub sweeps: u64,
    pub discoveries: u64,
    pub discovery_seconds: f64,
    /// By node GUID, since the exporter started.
    pub scrape_errors: &'a HashMap<u64, ScrapeErrors>,
    /// `check`'s thresholds in force, for the findings family.
    pub thresholds: &'a Thresholds,
    /// The SM check's finding (`None`: a master SM answered).
    pub sm: Option<&'a Finding>,
    /// Findings only the exporter makes: link-flapping from what it saw between sweeps,
    /// planes-disagree from every fabric's discovery, the cable findings of `cables`.
    pub extra: &'a [Finding],
    /// The ports' modules as last read (`serve --cables`): the ibscope_cable_* families.
    pub cables: Option<&'a FabricModules>,
}

/// The page `ibscope serve` makes after a sweep (everything but the per-scrape age),
/// written to `out` in pieces: counters, saturation, findings, link facts, nodes and the
/// exporter's own numbers. `health` is `health::assess` of `fabric`, `hosts` its hosts and
/// `page_labels` its label sets (all made once per discovery, not per sweep): a host's HCA
/// ports carry `host` and `rail` labels.
#[allow(clippy::too_many_arguments)]
pub fn write_fabric_page(
    out: &mut dyn io::Write,
    fabric: &Fabric,
    health: &HealthReport,
    hosts: &Hosts,
    names: Option<&NameMap>,
    sample: &Sample,
    stats: &PageStats<'_>,
    page_labels: &mut PageLabels,
) -> io::Result<()> {
    let rows = page_labels.add_sample(fabric, names, hosts, sample);
    let labels = &*page_labels;
    let prefix = labels.prefix.as_str();
    let swept: Vec<(&PortSample, &str)> = sample
        .ports
        .iter()
        .zip(&rows)
        .map(|(p, &row)| (p, labels.row(row)))
        .collect();
    let mut out = PageText::new(out);
    counter_families(
        &mut out,
        stats.counters,
        "(PMA; 64-bit PortCountersExtended where implemented)",
        &swept,
    );
    saturated_family(&mut out, &swept, stats.counters);
    let found = page_findings(fabric, health, hosts, names, sample, stats);
    findings_family(&mut out, prefix, &found);
    link_families(&mut out, fabric, labels);
    degraded_family(&mut out, health, labels);
    node_families(&mut out, labels, stats.scrape_errors);
    if let Some(modules) = stats.cables {
        super::prometheus_cables::cable_families(&mut out, labels, modules);
    }
    exporter_families(&mut out, prefix, fabric, sample, stats);
    out.finish()
}

fn saturated_family<L: AsRef<str>>(
    out: &mut PageText<'_>,
    swept: &[(&PortSample, L)],
    on_page: &[&str],
) {
    let name = "ibscope_port_saturated_counters";
    let help =
        "Counters of the port on this page stuck at their maximum without a 64-bit replacement.";
    out.head(name, "gauge", help);
    // Ports without PortCounters have no sample.
    for (p, labels) in swept.iter().filter(|(p, _)| p.counters.is_some()) {
        let stuck = |s: &&String| on_page.contains(&s.as_str()) && p.is_saturated(s);
        let n = p.saturated.iter().filter(stuck).count();
        out.sample(name, labels.as_ref(), n as u64);
    }
}

/// The findings `ibscope check` reports, counted by kind: the same policy and thresholds
/// (the threshold file in force) as `check` without --thresholds.
fn page_findings(
    fabric: &Fabric,
    health: &HealthReport,
    hosts: &Hosts,
    names: Option<&NameMap>,
    sample: &Sample,
    stats: &PageStats<'_>,
) -> Vec<Finding> {
    let mut found = findings::fabric_findings(fabric, names, health);
    found.extend(findings::host_findings(fabric, names, hosts, None));
    found.extend(findings::counter_findings(sample, stats.thresholds));
    found.extend(stats.sm.cloned());
    found.extend(stats.extra.iter().cloned());
    found
}

/// [`page_findings`] counted by kind.
fn findings_family(out: &mut PageText<'_>, prefix: &str, found: &[Finding]) {
    out.head(
        "ibscope_findings",
        "gauge",
        "Findings of `ibscope check` on the last sweep, by kind and severity.",
    );
    for (kind, n) in findings::count_by_kind(found, findings::Scope::Fabric) {
        let labels = format!(
            "{prefix},kind=\"{kind}\",severity=\"{}\"",
            kind.severity().as_str()
        );
        out.sample("ibscope_findings", &labels, n as u64);
    }
}

/// A gauge per link fact from the last discovery: its value of each port, if any.
type LinkFact = fn(&Port) -> Option<FactValue>;

/// A link fact's value: a code or count, or a rate in Gb/s.
#[derive(Clone, Copy)]
enum FactValue {
    Whole(u32),
    Rate(f64),
}

fn link_facts() -> [(&'static str, String, LinkFact); 7] {
    [
        (
            "ibscope_port_state",
            code_help(
                "PortState",
                PortState::KNOWN.iter().map(|s| (s.code(), s.name())),
            ),
            |p| Some(FactValue::Whole(p.state.map_or(0, PortState::code).into())),
        ),
        (
            "ibscope_port_phys_state",
            code_help(
                "PortPhysicalState",
                PhysState::KNOWN.iter().map(|s| (s.code(), s.name())),
            ),
            |p| {
                Some(FactValue::Whole(
                    p.phys_state.map_or(0, PhysState::code).into(),
                ))
            },
        ),
        (
            "ibscope_port_active",
            "1 if the port is Active, else 0.".into(),
            |p| Some(FactValue::Whole(p.is_active().into())),
        ),
        (
            "ibscope_port_link_up",
            "1 if the port is physically LinkUp, else 0.".into(),
            |p| Some(FactValue::Whole(p.is_phys_up().into())),
        ),
        (
            "ibscope_port_width_lanes",
            "Active link width in lanes (ports with a link only).".into(),
            |p| p.width_active.map(|w| FactValue::Whole(w.lanes())),
        ),
        (
            "ibscope_port_speed_gbps_per_lane",
            "Active link speed: signalling rate of one lane in Gb/s.".into(),
            |p| p.speed_active.map(|s| FactValue::Rate(s.lane_gbps())),
        ),
        (
            "ibscope_port_data_rate_gbps",
            "Active data rate of the link in Gb/s (lanes x lane data rate after encoding).".into(),
            |p| {
                let (w, s) = (p.width_active?, p.speed_active?);
                Some(FactValue::Rate(f64::from(w.lanes()) * s.lane_data_gbps()))
            },
        ),
    ]
}

fn link_families(out: &mut PageText<'_>, fabric: &Fabric, labels: &PageLabels) {
    // Each port found once, not once per fact.
    let ports: Vec<Option<&Port>> = (labels.ends.iter())
        .map(|e| fabric.node(e.node).port(e.port))
        .collect();
    let mut rate_text = String::new();
    for (name, help, fact) in link_facts() {
        out.head(name, "gauge", &help);
        for (row, port) in ports.iter().enumerate() {
            match port.and_then(fact) {
                Some(FactValue::Whole(n)) => out.sample(name, labels.row(row), n.into()),
                Some(FactValue::Rate(rate)) => {
                    rate_text.clear();
                    let _ = write!(rate_text, "{rate}");
                    out.sample_text(name, labels.row(row), &rate_text);
                }
                None => {}
            }
        }
    }
}

/// Degraded flag of both ends of every link (healthy ones as 0).
fn degraded_family(out: &mut PageText<'_>, health: &HealthReport, labels: &PageLabels) {
    let name = "ibscope_port_degraded";
    let help = "1 if the port's link runs below what both ends could do or below the fabric norm.";
    out.head(name, "gauge", help);
    for link in &health.links {
        for end in [&link.a, &link.b] {
            if let Some(row) = labels.row_of(end.at.key()) {
                out.sample(name, labels.row(row), link.degraded.into());
            }
        }
    }
}

/// One of a node's failure counts.
type ErrorCount = fn(ScrapeErrors) -> u64;

fn node_families(
    out: &mut PageText<'_>,
    labels: &PageLabels,
    scrape_errors: &HashMap<u64, ScrapeErrors>,
) {
    let name = "ibscope_node_info";
    let help = "One per discovered node; its facts are labels.";
    out.head(name, "gauge", help);
    for (_, _, info) in &labels.nodes {
        out.sample(name, info, 1);
    }
    let counted: [(&str, &str, ErrorCount); 2] = [
        (
            "ibscope_node_scrape_errors_total",
            "PMA queries of this node that failed (timeouts included), since the exporter started.",
            |e| e.errors,
        ),
        (
            "ibscope_node_scrape_timeouts_total",
            "PMA queries of this node that got no reply after every retry, since start.",
            |e| e.timeouts,
        ),
    ];
    for (name, help, count) in counted {
        out.head(name, "counter", help);
        for (guid, own, _) in &labels.nodes {
            let errors = scrape_errors.get(guid).copied().unwrap_or_default();
            out.sample(name, own, count(errors));
        }
    }
}

/// The exporter itself: a sample each.
fn exporter_families(
    out: &mut PageText<'_>,
    prefix: &str,
    fabric: &Fabric,
    sample: &Sample,
    stats: &PageStats<'_>,
) {
    let seconds = |ms: u64, decimals: usize| format!("{:.*}", decimals, ms as f64 / 1000.0);
    let families: [(&str, &str, &str, String); 9] = [
        (
            "ibscope_fabric_nodes",
            "gauge",
            "Nodes found by the last discovery.",
            fabric.node_count().to_string(),
        ),
        (
            "ibscope_fabric_links",
            "gauge",
            "Links found by the last discovery.",
            fabric.link_count().to_string(),
        ),
        (
            "ibscope_sweep_ports",
            "gauge",
            "Ports whose counters the last sweep read (or tried to).",
            sample.ports.len().to_string(),
        ),
        (
            "ibscope_sweep_mads",
            "gauge",
            "MADs the last sweep sent.",
            sample.mads_sent.to_string(),
        ),
        (
            "ibscope_sweep_timestamp_seconds",
            "gauge",
            "Unix time the last sweep started.",
            seconds(sample.time_ms, 3),
        ),
        (
            "ibscope_sweep_duration_seconds",
            "gauge",
            "How long the last counter sweep took.",
            seconds(sample.duration_ms, 6),
        ),
        (
            "ibscope_sweeps_total",
            "counter",
            "Counter sweeps since the exporter started.",
            stats.sweeps.to_string(),
        ),
        (
            "ibscope_discoveries_total",
            "counter",
            "Fabric discoveries since the exporter started.",
            stats.discoveries.to_string(),
        ),
        (
            "ibscope_discovery_duration_seconds",
            "gauge",
            "How long the last discovery took.",
            format!("{:.6}", stats.discovery_seconds),
        ),
    ];
    for (name, kind, help, value) in families {
        out.head(name, kind, help);
        out.sample_text(name, prefix, &value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::prometheus_labels::push_guid;
    use crate::model::NodeKind;

    #[test]
    fn counter_names_pass_the_lint() {
        let cases = [
            ("SymbolErrorCounter", "ibscope_port_symbol_error_total"),
            ("LinkDownedCounter", "ibscope_port_link_downed_total"),
            ("PortXmitData", "ibscope_port_xmit_data_bytes_total"),
            ("VL15Dropped", "ibscope_port_vl15_dropped_total"),
            (
                "PortRcvRemotePhysicalErrors",
                "ibscope_port_rcv_remote_physical_errors_total",
            ),
            (
                "PortDLIDMappingErrors",
                "ibscope_port_dlid_mapping_errors_total",
            ),
            (
                "PortVLMappingErrors",
                "ibscope_port_vl_mapping_errors_total",
            ),
            (
                "PortNeighborMTUDiscards",
                "ibscope_port_neighbor_mtu_discards_total",
            ),
            (
                "PortSwHOQLifetimeLimitDiscards",
                "ibscope_port_sw_hoq_lifetime_limit_discards_total",
            ),
        ];
        // Every counter of the page has its own metric name.
        let mut all = counters::all_counter_names();
        all.extend(counters::detail_counter_names());
        let mut metrics: Vec<String> = all.iter().map(|n| metric_name(n)).collect();
        metrics.sort();
        metrics.dedup();
        assert_eq!(metrics.len(), all.len());
        assert_eq!(
            breakdown_source("PortLoopingErrors").as_deref(),
            Some("(PMA PortRcvErrorDetails, where PortRcvErrors counted)")
        );
        for (counter, metric) in cases {
            assert_eq!(metric_name(counter), metric);
        }
    }

    /// The GUID label writer, which skips `fmt`, writes what `fmt` writes.
    #[test]
    fn label_writers_match_fmt() {
        for guid in [0, 1, 0x0002_c903_00ab_cdef, u64::MAX] {
            let mut s = String::new();
            push_guid(&mut s, guid);
            assert_eq!(s, format!("{guid:#018x}"));
        }
    }

    #[test]
    fn families_have_help_and_type() {
        let mut out = String::new();
        family_head(&mut out, "ibscope_x", "gauge", "X.");
        sample_line(&mut out, "ibscope_x", "a=\"1\"", "2");
        sample_line(&mut out, "ibscope_x", "", "3");
        assert_eq!(
            out,
            "# HELP ibscope_x X.\n# TYPE ibscope_x gauge\nibscope_x{a=\"1\"} 2\nibscope_x 3\n"
        );
        let status = |name, up, age_seconds, reopens| FabricStatus {
            name,
            up,
            stale: !up,
            age_seconds,
            reopens,
        };
        let tail = scrape_families(&[
            status("a", true, Some(1.5), 0),
            status("b\"", false, None, 2),
        ]);
        assert!(tail.starts_with(
            "# HELP ibscope_sweep_age_seconds Seconds since the last sweep finished.\n\
             # TYPE ibscope_sweep_age_seconds gauge\n\
             ibscope_sweep_age_seconds{fabric=\"a\"} 1.500\n# HELP ibscope_up "
        ));
        for lines in [
            "# TYPE ibscope_up gauge\nibscope_up{fabric=\"a\"} 1\nibscope_up{fabric=\"b\\\"\"} 0\n",
            "# TYPE ibscope_sample_stale gauge\nibscope_sample_stale{fabric=\"a\"} 0\n\
             ibscope_sample_stale{fabric=\"b\\\"\"} 1\n",
            "# TYPE ibscope_port_reopens_total counter\nibscope_port_reopens_total{fabric=\"a\"} 0\n\
             ibscope_port_reopens_total{fabric=\"b\\\"\"} 2\n",
        ] {
            assert!(tail.contains(lines), "{lines:?} in\n{tail}");
        }
        let families = split_families(&tail);
        let names: Vec<&str> = families.iter().map(|f| f.0).collect();
        assert_eq!(
            names,
            [
                "ibscope_sweep_age_seconds",
                "ibscope_up",
                "ibscope_sample_stale",
                "ibscope_port_reopens_total"
            ]
        );
        assert!(families[0].1.ends_with("gauge\n") && families[0].2.ends_with("1.500\n"));
        let joined: String = families.iter().map(|f| format!("{}{}", f.1, f.2)).collect();
        assert_eq!(joined, tail);
    }

    #[test]
    fn code_help_lists_the_table() {
        let help = code_help(
            "PortState",
            PortState::KNOWN.iter().map(|s| (s.code(), s.name())),
        );
        assert!(
            help.starts_with("PortState (1 Down, 2 Initialize"),
            "{help}"
        );
        assert!(help.ends_with("; 0 not read)."), "{help}");
    }

    /// A small fat tree discovered and swept through the in-process responder.
    struct Swept {
        fabric: Fabric,
        health: HealthReport,
        hosts: Hosts,
        sample: Sample,
    }

    fn swept() -> Swept {
        use crate::responder::{FabricModel, FabricPort, ResponderOptions};
        use ibscope_mad::engine::{Engine, EngineConfig};
        use std::sync::Arc;
        let text = crate::gen::fat_tree(&crate::gen::FatTreeSpec::new(2, 8, 12)).unwrap();
        let model = FabricModel::from_fabric(&crate::ibnd::parse(&text).unwrap(), 0).unwrap();
        let port = FabricPort::new(Arc::new(model), ResponderOptions::default());
        let mut engine = Engine::with_port(port, EngineConfig::default(), 1);
        let options = crate::discover::DiscoverOptions { read_lft: false };
        let fabric = crate::discover::discover(&mut engine, options, |_| {});
        let targets = counters::targets(&fabric, None, None);
        let mut sample = counters::sweep(&mut engine, &fabric, &targets, None);
        assert!(sample.ports.len() > 20, "{}", sample.ports.len());
        // A switch's port 0, as an enhanced one is swept (these switches' are not): a
        // port the model does not list.
        let switch = sample
            .ports
            .iter()
            .position(|p| p.at.node.kind == NodeKind::Switch);
        let mut port0 = sample.ports[switch.expect("a switch swept")].clone();
        port0.at.port = 0;
        sample.ports.insert(1, port0);
        let health = crate::health::assess(&fabric, None, &Default::default());
        let hosts = Hosts::group(&fabric, None);
        Swept {
            fabric,
            health,
            hosts,
            sample,
        }
    }

    /// The fabric's name on the test pages: its label needs escaping.
    const FABRIC: &str = "f\"a";

    /// The page written whole, with labels of its own.
    fn fabric_page(
        fabric: &Fabric,
        health: &HealthReport,
        hosts: &Hosts,
        names: Option<&NameMap>,
        sample: &Sample,
        stats: &PageStats<'_>,
    ) -> String {
        let mut out = Vec::new();
        let mut labels = PageLabels::new(fabric, names, hosts, FABRIC, PortFilter::default());
        write_fabric_page(
            &mut out,
            fabric,
            health,
            hosts,
            names,
            sample,
            stats,
            &mut labels,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Every counter family, `sweeps` sweeps, no SM finding.
    fn page_stats<'a>(
        counters: &'a [&'static str],
        scrape_errors: &'a HashMap<u64, ScrapeErrors>,
        thresholds: &'a Thresholds,
        sweeps: u64,
    ) -> PageStats<'a> {
        PageStats {
            counters,
            sweeps,
            discoveries: 0,
            discovery_seconds: 0.0,
            scrape_errors,
            thresholds,
            sm: None,
            extra: &[],
            cables: None,
        }
    }

    /// Pages written with the same labels, one after the other, are the page made with
    /// labels of its own; a writer's error is returned.
    #[test]
    fn a_page_with_kept_labels_is_the_page_made_anew() {
        let s = swept();
        let names = counters::all_counter_names();
        let (errors, thresholds) = (HashMap::new(), Thresholds::default());
        let st = page_stats(&names, &errors, &thresholds, 1);
        // Switch ports 0 are swept but not listed by the model: rows of their own.
        assert!(s.sample.ports.iter().any(|p| p.at.port == 0));
        let whole = fabric_page(&s.fabric, &s.health, &s.hosts, None, &s.sample, &st);
        let filter = PortFilter::default();
        let mut labels = PageLabels::new(&s.fabric, None, &s.hosts, FABRIC, filter);
        for _ in 0..2 {
            let mut written = Vec::new();
            let (fabric, health, hosts, sample) = (&s.fabric, &s.health, &s.hosts, &s.sample);
            write_fabric_page(
                &mut written,
                fabric,
                health,
                hosts,
                None,
                sample,
                &st,
                &mut labels,
            )
            .unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), whole);
        }
        let mut full = [0u8; 100];
        let mut short = &mut full[..];
        let e = write_fabric_page(
            &mut short,
            &s.fabric,
            &s.health,
            &s.hosts,
            None,
            &s.sample,
            &st,
            &mut labels,
        );
        assert!(e.is_err());
    }

    use crate::counters::CounterSet;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Pages after any run of changes to the sample, the fabric, its health, the names
        /// and the scrape errors, written with the labels kept from the page before: each
        /// equals the page rendered whole.
        #[test]
        fn pages_written_with_kept_labels_are_the_pages_rendered_whole(
            changes in proptest::collection::vec((0u8..9, any::<u16>(), any::<u64>()), 1..8)
        ) {
            let mut s = swept();
            let names = counters::all_counter_names();
            let (mut errors, thresholds) = (HashMap::new(), Thresholds::default());
            let mut map: Option<NameMap> = None;
            // The port labels, kept from page to page until the fabric or the names change
            // (as the sweeper keeps them until it rediscovers).
            let mut labels: Option<PageLabels> = None;
            for (step, (kind, at, value)) in changes.into_iter().enumerate() {
                let n = s.sample.ports.len();
                let i = usize::from(at) % n.max(1);
                match kind {
                    // A reading's value, or its saturation.
                    0 | 1 if n > 0 => {
                        let port = &mut s.sample.ports[i];
                        let set = if kind == 0 { &mut port.counters } else { &mut port.extended };
                        if let Some(read) = set.as_ref() {
                            let mut readings = read.readings().to_vec();
                            if !readings.is_empty() {
                                let k = (value as usize) % readings.len();
                                readings[k].value = value % 4;
                                readings[k].saturated = value % 3 == 0;
                                if readings[k].saturated {
                                    port.saturated.push(readings[k].name.to_string());
                                }
                            }
                            *set = Some(CounterSet::from_readings(readings));
                        }
                    }
                    // A port's extended counters gone (its values from PortCounters).
                    2 if n > 0 => s.sample.ports[i].extended = None,
                    // A port no longer swept.
                    3 if n > 0 => {
                        s.sample.ports.remove(i);
                    }
                    // A port of the fabric down.
                    4 => {
                        let ids: Vec<_> = s.fabric.nodes().map(|(id, _)| id).collect();
                        let id = ids[usize::from(at) % ids.len()];
                        let node = s.fabric.node_mut(id);
                        let number = (value % u64::from(node.num_ports.max(1))) as u8 + 1;
                        if let Some(p) = node.port_mut(number) {
                            p.state = Some(PortState::Down);
                            p.width_active = None;
                        }
                        s.health = crate::health::assess(&s.fabric, None, &Default::default());
                        labels = None;
                    }
                    // A link's verdict.
                    5 if !s.health.links.is_empty() => {
                        let l = usize::from(at) % s.health.links.len();
                        s.health.links[l].degraded ^= true;
                    }
                    // A name map that renames a node.
                    6 => {
                        let guid = s.fabric.nodes().nth(usize::from(at) % s.fabric.node_count())
                            .map(|(_, node)| node.guid).unwrap();
                        map = Some(NameMap::parse(&format!("{guid:#x} \"renamed {value}\"\n"), "test").unwrap());
                        s.hosts = Hosts::group(&s.fabric, map.as_ref());
                        labels = None;
                    }
                    // A node's PMA query failed, or timed out.
                    7 => {
                        let guid = s.fabric.nodes().nth(usize::from(at) % s.fabric.node_count())
                            .map(|(_, node)| node.guid).unwrap();
                        let e: &mut ScrapeErrors = errors.entry(guid).or_default();
                        e.errors += 1;
                        e.timeouts += value % 2;
                    }
                    // Nothing: the same page again.
                    _ => {}
                }
                let st = page_stats(&names, &errors, &thresholds, step as u64);
                let (fabric, health, hosts, sample) = (&s.fabric, &s.health, &s.hosts, &s.sample);
                let kept = labels.get_or_insert_with(|| {
                    PageLabels::new(fabric, map.as_ref(), hosts, FABRIC, PortFilter::default())
                });
                let mut got = Vec::new();
                let names = map.as_ref();
                write_fabric_page(&mut got, fabric, health, hosts, names, sample, &st, kept)
                    .unwrap();
                let got = String::from_utf8(got).unwrap();
                let whole = fabric_page(fabric, health, hosts, map.as_ref(), sample, &st);
                prop_assert_eq!(got, whole);
            }
        }
    }

    /// The page's values are each port's best ones, whatever order and mix of sets the
    /// ports' readings come in.
    #[test]
    fn best_values_are_each_ports_best_reading() {
        use crate::counters::sample::test_support::port_sample;
        use crate::counters::{CounterSet, Details};
        let mut ports = [
            port_sample(
                &[("PortXmitData", 8), ("SymbolErrorCounter", 1)],
                Some(&[("PortXmitData", 1 << 40), ("PortUnicastXmitPkts", 9)]),
                &[],
            ),
            // Another order, no extended counters, a counter twice.
            port_sample(
                &[
                    ("SymbolErrorCounter", 2),
                    ("PortXmitData", 4),
                    ("PortXmitData", 5),
                ],
                None,
                &[],
            ),
            port_sample(&[], Some(&[("PortUnicastXmitPkts", 3)]), &[]),
        ];
        let mut details = Details::default();
        details.insert(
            "PortRcvErrorDetails",
            CounterSet::from_pairs([("PortMalformedPktErrors", 4), ("Unlisted", 1)]),
        );
        ports[2].details = details;
        let names = [
            "SymbolErrorCounter",
            "PortXmitData",
            "PortUnicastXmitPkts",
            "PortMalformedPktErrors",
            "PortRcvErrors",
        ];
        let labelled: Vec<(&PortSample, &str)> = ports.iter().map(|p| (p, "")).collect();
        let best = BestValues::new(&names, &labelled);
        let mut found = 0;
        for (i, p) in ports.iter().enumerate() {
            for (k, name) in names.iter().enumerate() {
                assert_eq!(best.value(k, i), p.value(name), "port {i} {name}");
                found += usize::from(best.value(k, i).is_some());
            }
        }
        assert_eq!(found, 7);
    }
}
