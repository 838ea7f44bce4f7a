//! The host as Prometheus text (`ibscope host --prometheus`), for node_exporter's textfile
//! collector or any scraper of files: what node_exporter's InfiniBand collector does not
//! read (hw_counters, the RoCE netdev's pause and discard statistics, the preflight's
//! findings). Labels are escaped; every family has its HELP and TYPE.

use std::fmt::Write;

use ibscope_mad::attr::PortState;
use ibscope_topo::escape::for_prometheus_label;
use ibscope_topo::findings::{Scope, FINDING_KINDS};

use crate::counters::{CounterFileValue, RdmaCounterSet};
use crate::model::LocalHost;
use crate::preflight::HostFinding;

/// `name="value"` pairs, escaped, comma-separated.
fn labels(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", for_prometheus_label(v)))
        .collect::<Vec<_>>()
        .join(",")
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The priority a per-priority statistic counts (`rx_prio3_pause`: 3).
fn priority_of(name: &str) -> Option<&str> {
    let at = name.find("prio")? + 4;
    let digits = &name[at..];
    let len = digits.bytes().take_while(u8::is_ascii_digit).count();
    (len > 0).then(|| &digits[..len])
}

/// The page: the host's identity and versions, its ports, every counter read and the
/// preflight's findings counted by kind (every host kind, zeros included).
pub fn page(host: &LocalHost, counters: &[RdmaCounterSet], findings: &[HostFinding]) -> String {
    let mut out = String::new();
    head(
        &mut out,
        "ibscope_host_info",
        "gauge",
        "The host and the versions of its RDMA stack (1).",
    );
    let v = &host.versions;
    let text = |x: &Option<String>| x.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "ibscope_host_info{{{}}} 1",
        labels(&[
            ("hostname", &text(&host.hostname)),
            ("kernel", &text(&host.kernel)),
            ("rdma_core", &text(&v.rdma_core)),
            ("nvidia_driver", &text(&v.nvidia_driver)),
            ("cuda_driver", &text(&v.cuda_driver)),
        ])
    );
    head(
        &mut out,
        "ibscope_host_port_active",
        "gauge",
        "1 when the RDMA port is Active.",
    );
    for d in &host.devices {
        for p in &d.ports {
            let port = p.port.to_string();
            let _ = writeln!(
                out,
                "ibscope_host_port_active{{{}}} {}",
                labels(&[
                    ("device", &d.name),
                    ("port", &port),
                    ("link_layer", p.link_layer.short())
                ]),
                u8::from(p.state == Some(PortState::Active))
            );
        }
    }
    head(
        &mut out,
        "ibscope_host_port_rate_gbps",
        "gauge",
        "The active port's data rate, Gb/s.",
    );
    for d in &host.devices {
        for p in &d.ports {
            if let Some(r) = p.rate() {
                let port = p.port.to_string();
                let _ = writeln!(
                    out,
                    "ibscope_host_port_rate_gbps{{{}}} {}",
                    labels(&[("device", &d.name), ("port", &port)]),
                    r.nominal_gbps()
                );
            }
        }
    }
    counters_family(&mut out, counters);
    head(
        &mut out,
        "ibscope_host_findings",
        "gauge",
        "Findings of `ibscope host --check`, by kind and severity.",
    );
    for k in FINDING_KINDS.iter().filter(|k| k.scope == Scope::Host) {
        let n = findings.iter().filter(|f| f.finding.kind == k.kind).count();
        let _ = writeln!(
            out,
            "ibscope_host_findings{{{}}} {n}",
            labels(&[("kind", k.name), ("severity", k.severity.as_str())])
        );
    }
    head(
        &mut out,
        "ibscope_host_ready",
        "gauge",
        "1 when `ibscope host --check` finds nothing.",
    );
    let _ = writeln!(out, "ibscope_host_ready {}", u8::from(findings.is_empty()));
    out
}

/// Every counter with a value, by device, port, netdev, priority, group and source.
fn counters_family(out: &mut String, counters: &[RdmaCounterSet]) {
    head(
        out,
        "ibscope_host_statistic_total",
        "counter",
        "An RDMA counter of a port or device as its driver names it (data counters in bytes), \
         and a RoCE netdev's pause and discard statistics.",
    );
    for set in counters {
        let port = set.port.map(|p| p.to_string()).unwrap_or_default();
        for c in &set.counters {
            let CounterFileValue::Value(value) = c.reading else {
                continue;
            };
            let source = serde_json::to_value(c.source).unwrap_or_default();
            let group = serde_json::to_value(c.group).unwrap_or_default();
            let mut pairs = vec![("device", set.device.as_str())];
            if set.port.is_some() {
                pairs.push(("port", port.as_str()));
            }
            if let Some(n) = &set.netdev {
                pairs.push(("netdev", n.as_str()));
            }
            if let Some(p) = priority_of(&c.name) {
                pairs.push(("priority", p));
            }
            pairs.push(("group", group.as_str().unwrap_or("other")));
            pairs.push(("source", source.as_str().unwrap_or("")));
            pairs.push(("name", c.name.as_str()));
            let _ = writeln!(
                out,
                "ibscope_host_statistic_total{{{}}} {value}",
                labels(&pairs)
            );
        }
    }
}

/// The host's Prometheus page as `serve --host` and `host --prometheus` give it: read the
/// host, check it against `roce`, write its families.
pub fn read_page(roce: Option<crate::roce::RoceProfile>) -> Result<String, crate::GatherError> {
    let host = crate::gather(&crate::GatherOptions {
        counters: true,
        ..crate::GatherOptions::from_env()
    })?;
    let findings = crate::preflight::preflight(
        &host,
        &crate::preflight::PreflightOptions { expect: None, roce },
    );
    Ok(page(&host, &host.counters, &findings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_come_from_the_name() {
        assert_eq!(priority_of("rx_prio3_pause"), Some("3"));
        assert_eq!(priority_of("tx_prio7_pause_duration"), Some("7"));
        assert_eq!(priority_of("rx_discards_phy"), None);
        assert_eq!(priority_of("prio"), None);
    }
}
