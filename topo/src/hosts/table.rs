//! The hosts table of `ibscope hosts`: a row per HCA port and per rail a server lacks,
//! fabric strings escaped for the terminal.

use ibscope_mad::attr::link::Rate;

use super::group::Hosts;
use super::rails::RailIssue;
use crate::escape::for_terminal;
use crate::health;
use crate::model::Fabric;
use crate::namemap::NameMap;

/// HOST, RAIL, HCA, PORT, LID, RATE, STATE, LEAF, LEAF-PORT.
pub type TableRow = [String; 9];

/// A host's rows: its HCA ports, and a `missing` row for each rail it should have and has
/// no HCA on.
pub fn table_rows(
    fabric: &Fabric,
    names: Option<&NameMap>,
    all: &Hosts,
    issues: &[RailIssue],
    h: usize,
) -> Vec<TableRow> {
    let host = &all.hosts()[h];
    let name = for_terminal(&host.name);
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let mut rows: Vec<(Option<u8>, TableRow)> = host
        .hcas
        .iter()
        .map(|c| {
            let (leaf, leaf_port) = match &c.leaf {
                Some(l) => {
                    let mut port = l.port.to_string();
                    if c.is_misaligned() {
                        port.push_str(&format!(
                            " (leaf of rail {})",
                            opt(l.rail.map(|r| r.to_string()))
                        ));
                    }
                    (for_terminal(&l.name), port)
                }
                None => ("-".into(), "-".into()),
            };
            let row = [
                name.clone(),
                opt(c.rail.map(|r| r.to_string())),
                opt(c.device.as_deref().map(for_terminal)),
                c.port.to_string(),
                if c.lid == 0 {
                    "-".into()
                } else {
                    c.lid.to_string()
                },
                Rate::text_of(c.rate),
                health::state_text(c.state, c.phys_state),
                leaf,
                leaf_port,
            ];
            (c.rail, row)
        })
        .collect();
    for issue in issues {
        let RailIssue::Down(d) = issue else { continue };
        if d.host != h || d.hca.is_some() {
            continue;
        }
        let (leaf, port) = match d.expected {
            Some(e) => (
                for_terminal(crate::namemap::display_name(fabric.node(e.node), names)),
                format!("{} (no link)", e.port),
            ),
            None => ("?".into(), "?".into()),
        };
        let row = [
            name.clone(),
            d.rail.to_string(),
            opt(d.device.as_deref().map(for_terminal)),
            "-".into(),
            "-".into(),
            "-".into(),
            "missing".into(),
            leaf,
            port,
        ];
        rows.push((Some(d.rail), row));
    }
    rows.sort_by_key(|(rail, _)| (rail.is_none(), *rail));
    rows.into_iter().map(|(_, r)| r).collect()
}
