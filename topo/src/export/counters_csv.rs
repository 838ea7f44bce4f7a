//! The counters as CSV (`ibscope counters --format csv`): a line per port, a column per
//! counter (PortCounters, PortCountersExtended, and with details the detail attributes').
//! Node names are untrusted: quoted with [`for_csv`].

use std::io::{self, Write};

use ibscope_mad::attr::perf_attrs;

use crate::counters::{
    CounterSet, Sample, ADDITIONAL_EXTENDED, EXTENDED_COUNTER_NAMES, PORT_COUNTER_NAMES,
};
use crate::escape::for_csv;

/// The detail attributes' counters, as CSV columns `Attribute.Counter`.
fn detail_columns() -> Vec<String> {
    let mut cols = Vec::new();
    for b in perf_attrs::BREAKDOWNS {
        cols.extend(
            b.fields
                .iter()
                .filter(|f| f.counter().is_some())
                .map(|f| format!("{}.{}", b.attribute, f.name)),
        );
    }
    let speeds =
        <ibscope_mad::attr::PortExtendedSpeedsCounters as ibscope_mad::attribute::Attribute>::NAME;
    let mut speed_counters: Vec<&str> = perf_attrs::EXTENDED_SPEEDS_COUNTERS.to_vec();
    for n in perf_attrs::EXTENDED_SPEEDS_RS_FEC_COUNTERS {
        if !speed_counters.contains(&n) {
            speed_counters.push(n);
        }
    }
    cols.extend(speed_counters.iter().map(|n| format!("{speeds}.{n}")));
    cols
}

/// The PortCountersExtended columns: its counters, the additional (error) ones included.
fn extended_columns() -> Vec<&'static str> {
    let mut cols = EXTENDED_COUNTER_NAMES.to_vec();
    cols.extend(ADDITIONAL_EXTENDED);
    cols
}

/// The header line: the port's columns, every counter, and with `details` the detail
/// attributes' counters.
pub fn header(details: bool) -> String {
    let mut cols: Vec<String> = ["time_ms", "node", "node_guid", "lid", "port"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    cols.extend(PORT_COUNTER_NAMES.iter().map(|s| s.to_string()));
    cols.extend(
        extended_columns()
            .iter()
            .map(|s| format!("PortCountersExtended.{s}")),
    );
    if details {
        cols.extend(detail_columns());
    }
    cols.push("saturated".into());
    cols.join(",")
}

/// A sample as CSV: the header, then a line per port.
pub fn write(out: &mut impl Write, sample: &Sample, details: bool) -> io::Result<()> {
    writeln!(out, "{}", header(details))?;
    write_rows(out, sample, None, details)
}

/// One line per port; `fabric` first when the command reads several.
pub fn write_rows(
    out: &mut impl Write,
    sample: &Sample,
    fabric: Option<&str>,
    details: bool,
) -> io::Result<()> {
    let detail_columns = if details {
        detail_columns()
    } else {
        Vec::new()
    };
    for p in &sample.ports {
        let mut row = fabric.map(|f| vec![for_csv(f)]).unwrap_or_default();
        row.extend([
            sample.time_ms.to_string(),
            for_csv(&p.at.node.name),
            format!("{:#018x}", p.at.node.guid),
            p.at.lid.to_string(),
            p.at.port.to_string(),
        ]);
        let get = |set: Option<&CounterSet>, n: &str| {
            set.and_then(|s| s.get(n))
                .map_or(String::new(), |v| v.to_string())
        };
        for n in PORT_COUNTER_NAMES {
            row.push(get(p.counters.as_ref(), n));
        }
        for n in extended_columns() {
            row.push(get(p.extended.as_ref(), n));
        }
        for col in &detail_columns {
            let (attribute, n) = col.split_once('.').unwrap_or((col, ""));
            row.push(get(p.details.get(attribute), n));
        }
        row.push(for_csv(&p.saturated.join(" ")));
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_header_has_every_counter() {
        let h = header(false);
        assert!(h.starts_with("time_ms,node,node_guid,lid,port,SymbolErrorCounter,"));
        assert!(h.contains(",PortCountersExtended.PortXmitData,"));
        assert!(h.contains(",PortCountersExtended.PortMulticastRcvPkts,"));
        assert!(h.ends_with(
            ",PortCountersExtended.VL15Dropped,PortCountersExtended.PortXmitWait,\
             PortCountersExtended.QP1Dropped,saturated"
        ));
        let d = header(true);
        assert!(d.contains(",PortRcvErrorDetails.PortLocalPhysicalErrors,"));
        assert!(d.contains(",PortXmitDiscardDetails.PortSwHOQLifetimeLimitDiscards,"));
        assert!(d.contains(",PortExtendedSpeedsCounters.FECUncorrectableBlockCtrLane11,"));
        assert!(d.ends_with(",PortExtendedSpeedsCounters.PortFECCorrectedSymbolCtr,saturated"));
        // No column twice (the layouts share their first two counters).
        let cols: Vec<&str> = d.split(',').collect();
        let mut unique = cols.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), cols.len());
    }
}
