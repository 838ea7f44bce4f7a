//! `ibscope host --counters`: the ports' and devices' RDMA counters, grouped, and with
//! --interval their rates; the counter-rate findings of `host --check --interval`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use ibscope_host::counters::{self, CounterFileValue, CounterRate, RdmaCounterSet};
use ibscope_host::sysfs::Sysfs;
use ibscope_host::HostFinding;
use ibscope_topo::escape::for_terminal;
use serde::Serialize;

use crate::cli::{exit, Global};

/// The interval of --interval, checked.
pub fn interval(seconds: f64) -> Result<Duration> {
    if !seconds.is_finite() || seconds <= 0.0 || seconds > 86_400.0 {
        bail!("--interval {seconds}: give seconds above 0 (at most a day)");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The counters of `only` (a device) or every device, under the sysfs root in force.
fn read(only: Option<&str>) -> Result<Vec<RdmaCounterSet>> {
    let sysfs = Sysfs::new(ibscope_host::GatherOptions::from_env().root);
    let sets = sysfs.counters(only);
    if sets.is_empty() {
        match only {
            Some(ca) => bail!("no RDMA device named {} with counters", for_terminal(ca)),
            None => bail!("{}", ibscope_host::NO_DEVICES),
        }
    }
    Ok(sets)
}

/// Two reads `interval` apart: the second read and the rates between them.
pub fn read_twice(
    only: Option<&str>,
    interval: Duration,
) -> Result<(Vec<RdmaCounterSet>, Vec<CounterRate>)> {
    let before = read(only)?;
    std::thread::sleep(interval);
    let after = read(only)?;
    let rates = counters::rates(&before, &after, interval);
    Ok((after, rates))
}

/// The `host-counter-rate` findings of two reads `interval` apart, against the limits of
/// the thresholds file in force (`host.COUNTER=N/s` lines), else the defaults; and the
/// `pfc-storm` findings of the same reads.
pub fn rate_findings(g: &Global, interval: Duration) -> Result<Vec<HostFinding>> {
    let limits = crate::fabric::thresholds(g, None)?.host_rates;
    let (_, rates) = read_twice(g.ca.as_deref(), interval)?;
    let mut found = counters::rate_findings(&rates, &limits, interval);
    found.extend(counters::pfc_storm_findings(&rates, interval));
    Ok(found)
}

#[derive(Serialize)]
struct Report<'a> {
    counters: &'a [RdmaCounterSet],
    #[serde(skip_serializing_if = "Option::is_none")]
    interval_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rates: Option<&'a [CounterRate]>,
}

pub fn run(g: &Global, json: bool, interval: Option<Duration>) -> Result<ExitCode> {
    let only = g.ca.as_deref();
    let (sets, rates) = match interval {
        Some(i) => {
            let (sets, rates) = read_twice(only, i)?;
            (sets, Some(rates))
        }
        None => (read(only)?, None),
    };
    let mut out = std::io::stdout().lock();
    if json {
        let report = Report {
            counters: &sets,
            interval_seconds: interval.map(|i| i.as_secs_f64()),
            rates: rates.as_deref(),
        };
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&crate::output::json_document(&report)?)?
        )?;
    } else {
        print_text(&mut out, &sets, rates.as_deref())?;
    }
    out.flush()?;
    Ok(ExitCode::from(exit::OK))
}

fn reading_text(r: &CounterFileValue) -> String {
    match r {
        CounterFileValue::Value(v) => v.to_string(),
        CounterFileValue::NotAvailable => "N/A (no PMA)".into(),
        CounterFileValue::Unknown(why) => format!("unknown ({})", for_terminal(why)),
    }
}

fn print_text(
    out: &mut impl Write,
    sets: &[RdmaCounterSet],
    rates: Option<&[CounterRate]>,
) -> std::io::Result<()> {
    for set in sets {
        let place = match set.port {
            Some(p) => format!("{} port {p}", for_terminal(&set.device)),
            None => format!("{} (device)", for_terminal(&set.device)),
        };
        let netdev = set
            .netdev
            .as_deref()
            .map_or_else(String::new, |n| format!(" ({})", for_terminal(n)));
        writeln!(out, "{place}{netdev}")?;
        let mut groups: Vec<_> = set.counters.iter().map(|c| c.group).collect();
        groups.sort();
        groups.dedup();
        for group in groups {
            writeln!(out, "  {}", group.title())?;
            for c in set.counters.iter().filter(|c| c.group == group) {
                let unit = c.unit.map_or("", |u| if u == "bytes" { " B" } else { "" });
                let rate = rates
                    .and_then(|rs| {
                        rs.iter().find(|r| {
                            r.device == set.device && r.port == set.port && r.name == c.name
                        })
                    })
                    .map(|r| match r.per_second {
                        Some(v) => format!("  {v:.2}{unit}/s"),
                        None => "  -".to_string(),
                    })
                    .unwrap_or_default();
                // A unit only after a number ("N/A (no PMA)" has none).
                let value_unit = match c.reading {
                    CounterFileValue::Value(_) => unit,
                    _ => "",
                };
                writeln!(
                    out,
                    "    {:<36} {:>20}{value_unit}{rate}",
                    for_terminal(&c.name),
                    reading_text(&c.reading)
                )?;
            }
        }
    }
    Ok(())
}
