//! How `ibscope cables` prints what it found: the table with the findings and the ports not
//! read, the inventory CSV, or JSON.

use anyhow::Result;
use ibscope_mad::cable::{self, Module};
use ibscope_topo::escape::{for_csv, for_terminal, quoted_for_terminal};

use super::cables_report::{Entry, Report};

pub fn print(report: &Report, json: bool, csv: bool) -> Result<()> {
    if json {
        return crate::output::print_json(report);
    }
    if csv {
        print_csv(&report.modules);
        return Ok(());
    }
    let with_rates = report.modules.iter().any(|e| e.rates.is_some());
    let mut header = [
        "PORT",
        "MAP",
        "VENDOR",
        "PART",
        "SERIAL",
        "MEDIA",
        "LEN",
        "TEMP",
        "RX dBm (per lane)",
    ]
    .map(String::from)
    .to_vec();
    if with_rates {
        header.extend(["TEMP/min".to_string(), "RX dB/min (per lane)".to_string()]);
    }
    let mut rows = vec![header];
    for e in &report.modules {
        let name = place(e);
        match (&e.module, &e.error) {
            (Some(m), _) => {
                let mut cells = row(&name, m);
                if with_rates {
                    cells.extend(rate_cells(e));
                }
                rows.push(cells);
            }
            (None, Some(err)) if e.source != "fabric" => {
                rows.push(vec![name, for_terminal(err)]);
            }
            _ => {}
        }
    }
    let mut out = std::io::stdout().lock();
    if rows.len() > 1 {
        crate::output::write_columns(&mut out, &rows)?;
    }
    for f in report.modules.iter().flat_map(|e| &e.findings) {
        let mut line = f.text_line();
        for ev in &f.evidence {
            line.push_str(&format!(" ({})", for_terminal(&ev.to_string())));
        }
        println!("{line}");
    }
    for e in &report.modules {
        if let Some(r) = e.rates.as_ref().filter(|r| !r.flags_raised.is_empty()) {
            println!(
                "{}: raised within {} s: {}",
                place(e),
                r.seconds,
                r.flags_raised.join(", ")
            );
        }
    }
    for line in not_read_lines(&report.modules) {
        println!("{line}");
    }
    for s in &report.fabrics {
        println!(
            "{}: {} port(s): {} module(s) read, {} empty, {} not read; {} SubnSet(AccessRegister) \
             MADs",
            for_terminal(&s.fabric),
            s.counts.ports,
            s.counts.read,
            s.counts.empty,
            s.counts.not_read,
            s.mads
        );
    }
    Ok(())
}

/// Where an entry's module is, for the table: the fabric port as `"node"[port]`.
fn place(e: &Entry) -> String {
    match &e.port {
        Some(p) => format!("{}[{}]", quoted_for_terminal(&p.node.name), p.port),
        None => for_terminal(&e.name),
    }
}

/// Nodes past which one reason is said once, with counts, rather than node by node: a
/// reason every node shares (no --access-register, a fabric that implements no register)
/// would otherwise bury the table under a line per node; `--json` keeps each port's.
const NODES_LISTED_PER_REASON: usize = 4;

/// The fabric ports not read: per fabric and reason, a line per node with the ports as
/// ranges, or one line of counts where the reason is shared by many nodes.
fn not_read_lines(entries: &[Entry]) -> Vec<String> {
    // (fabric, reason) -> nodes in order, each with its ports.
    type Reason<'a> = (Option<&'a str>, &'a str);
    type NodePorts = (String, Vec<u8>);
    let mut groups: Vec<(Reason, Vec<NodePorts>)> = Vec::new();
    for e in entries.iter().filter(|e| e.module.is_none()) {
        let (Some(p), Some(why)) = (&e.port, &e.error) else {
            continue;
        };
        let key = (e.fabric.as_deref(), why.as_str());
        let at = match groups.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                groups.push((key, Vec::new()));
                groups.len() - 1
            }
        };
        let nodes = &mut groups[at].1;
        let node = p.node.to_string();
        match nodes.last_mut() {
            Some((n, ports)) if *n == node => ports.push(p.port),
            _ => nodes.push((node, vec![p.port])),
        }
    }
    let mut out = Vec::new();
    for ((fabric, why), nodes) in groups {
        let fabric = fabric
            .map(|f| format!("{}: ", for_terminal(f)))
            .unwrap_or_default();
        let why = for_terminal(why);
        if nodes.len() > NODES_LISTED_PER_REASON {
            let ports: usize = nodes.iter().map(|(_, p)| p.len()).sum();
            out.push(format!(
                "{fabric}{ports} port(s) on {} nodes: {why} (--json lists each port)",
                nodes.len()
            ));
            continue;
        }
        for (node, ports) in nodes {
            let s = if ports.len() == 1 { "" } else { "s" };
            out.push(format!("{fabric}{node} port{s} {}: {why}", ranges(&ports)));
        }
    }
    out
}

/// `1-4,7,9-10`.
fn ranges(ports: &[u8]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ports.len() {
        let start = ports[i];
        let mut end = start;
        while i + 1 < ports.len() && ports[i + 1] == end.wrapping_add(1) {
            i += 1;
            end = ports[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

fn row(name: &str, m: &Module) -> Vec<String> {
    let id = &m.identity;
    let rx: Vec<String> = m
        .diagnostics
        .as_ref()
        .map(|d| {
            d.lanes
                .iter()
                .map(|l| match l.rx_power_mw.and_then(cable::model::units::dbm) {
                    Some(dbm) => format!("{dbm:.1}"),
                    None if l.rx_power_mw.is_some() => "dark".to_string(),
                    None => "-".to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    vec![
        name.to_string(),
        m.map.name().to_string(),
        for_terminal(&id.vendor),
        for_terminal(&id.part_number),
        for_terminal(&id.serial),
        m.media.name().to_string(),
        m.length_m.map_or("-".into(), |l| format!("{l}m")),
        m.diagnostics
            .as_ref()
            .and_then(|d| d.temperature_c)
            .map_or("-".into(), |t| format!("{t:.1}C")),
        if m.media.is_optical() && !rx.is_empty() {
            rx.join(" ")
        } else {
            "-".into()
        },
    ]
}

/// The temperature's and each lane's received light's rates of change, signed.
fn rate_cells(e: &Entry) -> [String; 2] {
    let Some(r) = &e.rates else {
        return ["-".into(), "-".into()];
    };
    let signed = |v: f64| format!("{v:+.2}");
    let rx: Vec<String> = r
        .lanes
        .iter()
        .map(|l| l.rx_power_db_per_min.map_or("-".into(), signed))
        .collect();
    [
        r.temperature_c_per_min
            .map_or("-".into(), |t| format!("{t:+.2}C")),
        if rx.is_empty() {
            "-".into()
        } else {
            rx.join(" ")
        },
    ]
}

/// The inventory: one line per module, every identity field.
fn print_csv(entries: &[Entry]) {
    println!(
        "source,name,map,identifier,vendor,oui,part_number,revision,serial,date_code,media,\
         length_m,wavelength_nm,temperature_c,checksums_ok,findings,error"
    );
    for e in entries {
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        let cells: Vec<String> = match &e.module {
            Some(m) => vec![
                m.map.name().into(),
                m.identifier.name().into(),
                m.identity.vendor.clone(),
                m.identity.oui.clone(),
                m.identity.part_number.clone(),
                m.identity.revision.clone(),
                m.identity.serial.clone(),
                m.identity.date_code.clone(),
                m.media.name().into(),
                opt(m.length_m),
                opt(m.wavelength_nm),
                opt(m.diagnostics.as_ref().and_then(|d| d.temperature_c)),
                m.checksums_ok().to_string(),
            ],
            None => vec![String::new(); 13],
        };
        let kinds: Vec<&str> = e.findings.iter().map(|f| f.kind.name()).collect();
        let mut line = vec![e.source.to_string(), e.name.clone()];
        line.extend(cells);
        line.push(kinds.join(" "));
        line.push(e.error.clone().unwrap_or_default());
        let line: Vec<String> = line.iter().map(|c| for_csv(c)).collect();
        println!("{}", line.join(","));
    }
}

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn ports_print_as_ranges() {
        assert_eq!(ranges(&[1, 2, 3, 4, 7, 9, 10]), "1-4,7,9-10");
        assert_eq!(ranges(&[5]), "5");
        assert_eq!(ranges(&[]), "");
    }
}
