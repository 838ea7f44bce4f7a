//! Samples and their changes as `ibscope counters` prints them in a terminal: fabric
//! names escaped, data in bytes (powers of 1024), a saturated counter as a lower bound.

use std::fmt::Write;

use super::delta::{CounterDelta, PortDelta};
use super::names::ERROR_COUNTERS;
use super::sample::{PortSample, Sample};
use crate::escape::for_terminal;

/// `writeln!` into a `String`, which cannot fail to take it.
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{ let _ = writeln!($out, $($arg)*); }};
}

/// Human-readable byte count, powers of 1024.
fn bytes(v: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = v as f64;
    let mut i = 0;
    while x >= 1024.0 && i + 1 < UNITS.len() {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v} B")
    } else {
        format!("{x:.1} {}", UNITS[i])
    }
}

fn port_label(p: &PortSample) -> String {
    format!(
        "{:<24} {:#018x} {:>5} {:>3}",
        for_terminal(&p.at.node.name),
        p.at.node.guid,
        p.at.lid,
        p.at.port
    )
}

/// A counter's value as the table shows it: "≥ 65535" when it stopped at its maximum.
fn shown(value: String, saturated: bool) -> String {
    if saturated {
        format!("≥ {value}")
    } else {
        value
    }
}

/// "Name=17", or "Name≥65535" for a saturated counter (a space-free token of a list).
fn named(name: &str, value: u64, saturated: bool) -> String {
    if saturated {
        format!("{name}≥{value}")
    } else {
        format!("{name}={value}")
    }
}

/// A sample as `counters`' table: one line per port, details indented below it.
pub fn sample_table(sample: &Sample) -> String {
    let mut text = String::new();
    let out = &mut text;
    w!(
        out,
        "{:<24} {:<18} {:>5} {:>3} {:>12} {:>12} {:>12} {:>12} {:>10}  errors",
        "node",
        "guid",
        "lid",
        "port",
        "xmit",
        "rcv",
        "xmit_pkts",
        "rcv_pkts",
        "xmit_wait"
    );
    for p in &sample.ports {
        if p.counters.is_none() && p.extended.is_none() {
            w!(out, "{} (no answer)", port_label(p));
            continue;
        }
        let cell = |name: &str, data: bool| match p.value(name) {
            Some(v) if data => shown(bytes(v), p.is_saturated(name)),
            Some(v) => shown(v.to_string(), p.is_saturated(name)),
            None => "-".into(),
        };
        let errors: Vec<String> = ERROR_COUNTERS
            .iter()
            .filter_map(|n| {
                let v = p.value(n)?;
                (v > 0).then(|| named(n, v, p.is_saturated(n)))
            })
            .collect();
        w!(
            out,
            "{} {:>12} {:>12} {:>12} {:>12} {:>10}  {}",
            port_label(p),
            cell("PortXmitData", true),
            cell("PortRcvData", true),
            cell("PortXmitPkts", false),
            cell("PortRcvPkts", false),
            cell("PortXmitWait", false),
            errors.join(" ")
        );
        for (attribute, set) in &p.details.0 {
            let counted: Vec<String> = set
                .readings()
                .iter()
                .filter(|r| r.value > 0)
                .map(|r| named(&r.name, r.value, r.saturated))
                .collect();
            let text = if counted.is_empty() {
                "all 0".to_string()
            } else {
                counted.join(" ")
            };
            w!(out, "    {attribute}: {text}");
        }
    }
    w!(
        out,
        "# {} ports; data in bytes; ≥ = saturated: stopped at its maximum (no 64-bit replacement)",
        sample.ports.len()
    );
    text
}

fn delta_cell(c: Option<&CounterDelta>, data: bool) -> String {
    match c {
        None => "-".into(),
        Some(c) if c.reset => "reset".into(),
        Some(c) if c.saturated => "saturated".into(),
        Some(c) => match c.per_second {
            Some(r) if data => format!("{}/s", bytes(r as u64)),
            Some(r) => format!("{r:.1}/s"),
            None => "-".into(),
        },
    }
}

/// Rates over an interval as `counters --interval`'s table.
pub fn deltas_table(deltas: &[PortDelta]) -> String {
    let mut text = String::new();
    let out = &mut text;
    w!(
        out,
        "{:<24} {:<18} {:>5} {:>3} {:>14} {:>14} {:>12} {:>12}  errors (delta)",
        "node",
        "guid",
        "lid",
        "port",
        "xmit",
        "rcv",
        "xmit_pkts",
        "rcv_pkts"
    );
    for d in deltas {
        let get = |n: &str| d.counters.iter().find(|c| c.name == n);
        let errors: Vec<String> = d
            .counters
            .iter()
            .filter(|c| ERROR_COUNTERS.contains(&c.name))
            .filter(|c| c.reset || c.saturated || c.delta.is_some_and(|v| v > 0))
            .map(|c| match c.delta {
                Some(v) if !c.reset => format!("{}+{v}", c.name),
                _ => format!("{}:{}", c.name, if c.reset { "reset" } else { "saturated" }),
            })
            .collect();
        w!(
            out,
            "{:<24} {:#018x} {:>5} {:>3} {:>14} {:>14} {:>12} {:>12}  {}",
            for_terminal(&d.at.node.name),
            d.at.node.guid,
            d.at.lid,
            d.at.port,
            delta_cell(get("PortXmitData"), true),
            delta_cell(get("PortRcvData"), true),
            delta_cell(get("PortXmitPkts"), false),
            delta_cell(get("PortRcvPkts"), false),
            errors.join(" ")
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturated_counters_show_as_lower_bounds() {
        assert_eq!(shown("65535".into(), true), "≥ 65535");
        assert_eq!(shown("17".into(), false), "17");
        assert_eq!(
            named("LinkDownedCounter", 255, true),
            "LinkDownedCounter≥255"
        );
        assert_eq!(named("PortRcvErrors", 3, false), "PortRcvErrors=3");
    }

    #[test]
    fn byte_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(2048), "2.0 KiB");
    }
}
