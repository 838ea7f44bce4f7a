//! The cabling plan: the cables an integrator says a fabric has, as a CSV file with a
//! header `a_node,a_port,z_node,z_port` and optional columns `rate`, `part_number` and
//! `length_m` in any order (nodes by NodeDescription, name-map name or GUID), written from
//! a fabric (`discover --format plan`) and compared with one (`check --plan`): every cable
//! missing, extra, on the wrong port of the right node, on the wrong node, below the
//! planned rate, or (where the modules were read) of another part number or length.

use std::collections::HashSet;

use serde::Serialize;

use crate::health::Rate;
use crate::model::{End, Fabric, NodeId};
use crate::namemap::{display_name, NameMap};
use crate::resolve::{resolve, NameMatch, NamedTarget};

/// One end of a planned cable, as the plan names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanEnd {
    pub node: String,
    pub port: u8,
}

/// One cable of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedCable {
    pub a: PlanEnd,
    pub z: PlanEnd,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// The vendor part number of the cable (or of the module at each end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part_number: Option<String>,
    /// The cable assembly's length in metres.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length_m: Option<f64>,
    /// Its line in the plan file (1 is the header); 0 for a plan made from a fabric.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct CablingPlanError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

const HEADER: [&str; 4] = ["a_node", "a_port", "z_node", "z_port"];
/// The columns a plan may add after the four, in any order.
const OPTIONAL: [&str; 3] = ["rate", "part_number", "length_m"];
const HEADER_TEXT: &str = "a_node,a_port,z_node,z_port[,rate][,part_number][,length_m]";

/// The fields of one CSV line: commas separate, double quotes enclose a field holding
/// commas or quotes (`""` is a quote).
fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.trim().is_empty() => {
                field.clear();
                quoted = true;
            }
            (false, ',') => out.push(std::mem::take(&mut field).trim().to_string()),
            (_, c) => field.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed".into());
    }
    out.push(field.trim().to_string());
    Ok(out)
}

/// A plan file's cables. `file` names it in errors.
pub fn parse_csv(text: &str, file: &str) -> Result<Vec<PlannedCable>, CablingPlanError> {
    let err = |line: usize, message: String| CablingPlanError {
        file: file.to_string(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let Some((n, header)) = lines.next() else {
        return Err(err(
            1,
            "empty plan: expected a header a_node,a_port,z_node,z_port[,rate]".into(),
        ));
    };
    let header = fields(header).map_err(|m| err(n, m))?;
    let lower: Vec<String> = header.iter().map(|h| h.to_ascii_lowercase()).collect();
    let extra = lower.get(4..).unwrap_or(&[]);
    let known_extra = extra.iter().all(|c| OPTIONAL.contains(&c.as_str()))
        && (1..extra.len()).all(|i| !extra[..i].contains(&extra[i]));
    if lower.len() < 4 || lower[..4] != HEADER || !known_extra {
        return Err(err(
            n,
            format!(
                "expected the header {HEADER_TEXT}, got {:?}",
                header.join(",")
            ),
        ));
    }
    let column = |name: &str| lower.iter().position(|c| c == name);
    let (rate_at, part_at, length_at) = (column("rate"), column("part_number"), column("length_m"));
    let mut cables = Vec::new();
    for (n, line) in lines {
        let f = fields(line).map_err(|m| err(n, m))?;
        // Plans of several fabrics, one after the other, repeat the header.
        if f.iter()
            .map(|x| x.to_ascii_lowercase())
            .eq(lower.iter().cloned())
        {
            continue;
        }
        // The optional columns may be left off the end of a line.
        if f.len() > lower.len() || f.len() < 4 {
            return Err(err(
                n,
                format!("expected {} fields, got {}", lower.len(), f.len()),
            ));
        }
        let port = |i: usize| {
            f[i].parse::<u8>().ok().filter(|p| *p > 0).ok_or_else(|| {
                err(
                    n,
                    format!("{} {:?} is not a port number (1-255)", HEADER[i], f[i]),
                )
            })
        };
        let node = |i: usize| {
            if f[i].is_empty() {
                Err(err(n, format!("{} is empty", HEADER[i])))
            } else {
                Ok(f[i].clone())
            }
        };
        let cell = |at: Option<usize>| at.and_then(|i| f.get(i)).filter(|v| !v.is_empty());
        let rate = match cell(rate_at) {
            None => None,
            Some(r) => Some(
                Rate::parse(r)
                    .ok_or_else(|| err(n, format!("rate {r:?} is not WIDTHxSPEED, e.g. 4xNDR")))?,
            ),
        };
        let length_m = match cell(length_at) {
            None => None,
            Some(l) => Some(
                l.parse::<f64>()
                    .ok()
                    .filter(|m| m.is_finite() && *m > 0.0)
                    .ok_or_else(|| err(n, format!("length_m {l:?} is not a length in metres")))?,
            ),
        };
        cables.push(PlannedCable {
            a: PlanEnd {
                node: node(0)?,
                port: port(1)?,
            },
            z: PlanEnd {
                node: node(2)?,
                port: port(3)?,
            },
            rate,
            part_number: cell(part_at).cloned(),
            length_m,
            line: n,
        });
    }
    Ok(cables)
}

/// The plan a fabric is: each link once, with its active rate, nodes by their names.
pub fn from_fabric(fabric: &Fabric, names: Option<&NameMap>) -> Vec<PlannedCable> {
    fabric
        .links()
        .map(|l| PlannedCable {
            a: PlanEnd {
                node: display_name(l.a_node, names).to_string(),
                port: l.a.port,
            },
            z: PlanEnd {
                node: display_name(l.b_node, names).to_string(),
                port: l.b.port,
            },
            rate: rate_of(fabric, l.a).or_else(|| rate_of(fabric, l.b)),
            part_number: None,
            length_m: None,
            line: 0,
        })
        .collect()
}

fn rate_of(fabric: &Fabric, end: End) -> Option<Rate> {
    fabric.node(end.node).port(end.port)?.rate_active()
}

/// A field as CSV writes it: quoted when it holds a comma, a quote or outer blanks.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) || text.trim() != text {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The plan as a CSV file.
pub fn write_csv(cables: &[PlannedCable], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(out, "a_node,a_port,z_node,z_port,rate")?;
    for c in cables {
        writeln!(
            out,
            "{},{},{},{},{}",
            csv_field(&c.a.node),
            c.a.port,
            csv_field(&c.z.node),
            c.z.port,
            c.rate.map_or_else(String::new, |r| r.to_string())
        )?;
    }
    Ok(())
}

/// How the fabric differs from one planned cable (or has a cable the plan lacks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Difference {
    /// Neither end is cabled to the other.
    Missing,
    /// A cable the plan does not list.
    Extra,
    /// The right two nodes, but one end on another port.
    WrongPort,
    /// One end's port goes to another node.
    WrongNode,
    /// Cabled as planned, running below the planned rate.
    BelowRate,
    /// The plan names a node the fabric does not have (or names it ambiguously).
    UnknownNode,
    /// Cabled as planned, but the module at an end is another part number or the cable
    /// another length than planned.
    WrongCable,
}

/// One difference, with both ends in words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanDifference {
    pub kind: Difference,
    /// The planned cable (absent for an extra one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned: Option<PlannedCable>,
    /// What the fabric has instead, "NODE[PORT] <-> NODE[PORT]", where there is a cable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
    pub message: String,
}

fn find_node(fabric: &Fabric, names: Option<&NameMap>, text: &str) -> Option<NodeId> {
    resolve(fabric, names, text, NameMatch::Exact)
        .ok()
        .map(NamedTarget::node)
}

fn end_text(fabric: &Fabric, names: Option<&NameMap>, end: End) -> String {
    format!(
        "{:?}[{}]",
        display_name(fabric.node(end.node), names),
        end.port
    )
}

fn planned_text(c: &PlannedCable) -> String {
    format!(
        "{:?}[{}] <-> {:?}[{}]",
        c.a.node, c.a.port, c.z.node, c.z.port
    )
}

/// How the fabric differs from one planned cable whose two nodes it has, if it does.
fn judge(
    c: &PlannedCable,
    a_end: End,
    z_end: End,
    fabric: &Fabric,
    names: Option<&NameMap>,
) -> Option<PlanDifference> {
    let (a, z) = (a_end.node, z_end.node);
    let diff = |kind, actual: Option<String>, message: String| PlanDifference {
        kind,
        planned: Some(c.clone()),
        actual,
        message,
    };
    let link = |e: End| fabric.peer(e).map(|p| (e, p));
    let actual = |(x, y): (End, End)| {
        format!(
            "{} <-> {}",
            end_text(fabric, names, x),
            end_text(fabric, names, y)
        )
    };
    match (link(a_end), link(z_end)) {
        (Some((_, peer)), _) if peer == z_end => {
            let active = match (rate_of(fabric, a_end), rate_of(fabric, z_end)) {
                (Some(x), Some(y)) => Some(x.lesser(y)),
                (x, y) => x.or(y),
            };
            let (want, got) = (c.rate?, active?);
            got.is_below(want).then(|| {
                diff(
                    Difference::BelowRate,
                    Some(actual((a_end, z_end))),
                    format!("{}: runs {got}, planned {want}", planned_text(c)),
                )
            })
        }
        (Some((_, peer)), _) if peer.node == z => Some(diff(
            Difference::WrongPort,
            Some(actual((a_end, peer))),
            format!(
                "{}: {} is cabled to port {} of {:?} instead",
                planned_text(c),
                end_text(fabric, names, a_end),
                peer.port,
                c.z.node
            ),
        )),
        (_, Some((_, peer))) if peer.node == a => Some(diff(
            Difference::WrongPort,
            Some(actual((z_end, peer))),
            format!(
                "{}: {} is cabled to port {} of {:?} instead",
                planned_text(c),
                end_text(fabric, names, z_end),
                peer.port,
                c.a.node
            ),
        )),
        (Some((_, peer)), _) => Some(diff(
            Difference::WrongNode,
            Some(actual((a_end, peer))),
            format!(
                "{}: {} goes to {} instead",
                planned_text(c),
                end_text(fabric, names, a_end),
                end_text(fabric, names, peer)
            ),
        )),
        (None, Some((_, peer))) => Some(diff(
            Difference::WrongNode,
            Some(actual((z_end, peer))),
            format!(
                "{}: {} goes to {} instead",
                planned_text(c),
                end_text(fabric, names, z_end),
                end_text(fabric, names, peer)
            ),
        )),
        (None, None) => Some(diff(
            Difference::Missing,
            None,
            format!("{}: missing (neither port is cabled)", planned_text(c)),
        )),
    }
}

/// Every difference between the plan and the fabric, in plan order, extra cables last.
pub fn compare(
    plan: &[PlannedCable],
    fabric: &Fabric,
    names: Option<&NameMap>,
) -> Vec<PlanDifference> {
    let mut out = Vec::new();
    // Ports the plan accounts for: a fabric cable touching none of them is extra.
    let mut planned_ports: HashSet<End> = HashSet::new();
    for c in plan {
        let (a, z) = (
            find_node(fabric, names, &c.a.node),
            find_node(fabric, names, &c.z.node),
        );
        let (Some(a), Some(z)) = (a, z) else {
            let which = if a.is_none() { &c.a.node } else { &c.z.node };
            out.push(PlanDifference {
                kind: Difference::UnknownNode,
                planned: Some(c.clone()),
                actual: None,
                message: format!("{}: no node {which:?} in the fabric", planned_text(c)),
            });
            continue;
        };
        let a_end = End {
            node: a,
            port: c.a.port,
        };
        let z_end = End {
            node: z,
            port: c.z.port,
        };
        planned_ports.insert(a_end);
        planned_ports.insert(z_end);
        out.extend(judge(c, a_end, z_end, fabric, names));
    }
    for l in fabric.links() {
        if !planned_ports.contains(&l.a) && !planned_ports.contains(&l.b) {
            let actual = format!(
                "{} <-> {}",
                end_text(fabric, names, l.a),
                end_text(fabric, names, l.b)
            );
            out.push(PlanDifference {
                kind: Difference::Extra,
                planned: None,
                message: format!("{actual}: not in the plan"),
                actual: Some(actual),
            });
        }
    }
    out
}

/// How far a cable's length may differ from the plan's: SFF-8636 and SFF-8472 give whole
/// metres, CMIS a multiple of 0.1 m.
const LENGTH_TOLERANCE_M: f64 = 0.5;

/// The planned part numbers and lengths against the modules read at both ends of every
/// cable cabled as planned (the others' differences are [`compare`]'s): an end whose
/// module is another part number, or a cable of another length, is a `wrong-cable`. An end
/// whose module was not read is not judged; how many planned cables could not be checked
/// at all is the second value.
pub fn compare_modules(
    plan: &[PlannedCable],
    fabric: &Fabric,
    names: Option<&NameMap>,
    modules: &crate::cable_reads::FabricModules,
) -> (Vec<PlanDifference>, usize) {
    use crate::cable_reads::ModuleRead;
    let module_at = |end: End| {
        let key = fabric.node(end.node).port_key(end.port);
        modules
            .ports
            .iter()
            .find(|p| p.at.key() == key)
            .and_then(|p| match &p.read {
                ModuleRead::Read { memory, .. } => ibscope_mad::cable::decode(memory).ok(),
                _ => None,
            })
    };
    let (mut out, mut unchecked) = (Vec::new(), 0);
    for c in plan
        .iter()
        .filter(|c| c.part_number.is_some() || c.length_m.is_some())
    {
        let (Some(a), Some(z)) = (
            find_node(fabric, names, &c.a.node),
            find_node(fabric, names, &c.z.node),
        ) else {
            continue;
        };
        let (a_end, z_end) = (
            End {
                node: a,
                port: c.a.port,
            },
            End {
                node: z,
                port: c.z.port,
            },
        );
        if fabric.peer(a_end) != Some(z_end) {
            continue;
        }
        let mut checked = false;
        for end in [a_end, z_end] {
            let Some(m) = module_at(end) else {
                continue;
            };
            checked = true;
            let id = &m.identity;
            let mut wrong = Vec::new();
            if let Some(pn) = &c.part_number {
                if !id.part_number.trim().eq_ignore_ascii_case(pn.trim()) {
                    wrong.push(format!("part number {:?}, planned {pn:?}", id.part_number));
                }
            }
            if let (Some(want), Some(got)) = (c.length_m, m.length_m) {
                if (want - got).abs() > LENGTH_TOLERANCE_M {
                    wrong.push(format!("{got} m long, planned {want} m"));
                }
            }
            if !wrong.is_empty() {
                out.push(PlanDifference {
                    kind: Difference::WrongCable,
                    planned: Some(c.clone()),
                    actual: Some(format!(
                        "{} SN {} at {}",
                        id.vendor,
                        id.serial,
                        end_text(fabric, names, end)
                    )),
                    message: format!(
                        "{}: the module at {} ({} SN {}) is {}",
                        planned_text(c),
                        end_text(fabric, names, end),
                        id.vendor,
                        id.serial,
                        wrong.join(" and ")
                    ),
                });
            }
        }
        unchecked += usize::from(!checked);
    }
    (out, unchecked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ibnd;

    const FABRIC: &str = r#"
Switch 8 "S1" # "leaf-1" base port 0 lid 1 lmc 0
[1] "H1"[1] # "gpu-01 mlx5_0" lid 3 4xHDR
[2] "H2"[1] # "gpu-02 mlx5_0" lid 4 2xHDR
[3] "S2"[1] # "leaf-2" lid 2 4xHDR

Switch 8 "S2" # "leaf-2" base port 0 lid 2 lmc 0
[1] "S1"[3] # "leaf-1" lid 1 4xHDR
[2] "H3"[1] # "gpu-03 mlx5_0" lid 5 4xHDR

Hca 1 "H1" # "gpu-01 mlx5_0"
[1] "S1"[1] # lid 3 lmc 0 "leaf-1" lid 1 4xHDR

Hca 1 "H2" # "gpu-02 mlx5_0"
[1] "S1"[2] # lid 4 lmc 0 "leaf-1" lid 1 2xHDR

Hca 1 "H3" # "gpu-03 mlx5_0"
[1] "S2"[2] # lid 5 lmc 0 "leaf-2" lid 2 4xHDR
"#;

    fn kinds(d: &[PlanDifference]) -> Vec<Difference> {
        d.iter().map(|d| d.kind).collect()
    }

    #[test]
    fn a_fabric_matches_the_plan_written_from_it() {
        let f = ibnd::parse(FABRIC).unwrap();
        let plan = from_fabric(&f, None);
        assert_eq!(plan.len(), 4);
        let mut text = Vec::new();
        write_csv(&plan, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with("a_node,a_port,z_node,z_port,rate\n"),
            "{text}"
        );
        let back = parse_csv(&text, "plan.csv").unwrap();
        assert_eq!(
            back.iter()
                .map(|c| (&c.a, &c.z, c.rate))
                .collect::<Vec<_>>(),
            plan.iter()
                .map(|c| (&c.a, &c.z, c.rate))
                .collect::<Vec<_>>()
        );
        assert!(compare(&back, &f, None).is_empty());
    }

    #[test]
    fn every_kind_of_difference_is_named() {
        let f = ibnd::parse(FABRIC).unwrap();
        let plan = parse_csv(
            "a_node,a_port,z_node,z_port,rate\n\
             leaf-1,1,gpu-01 mlx5_0,1,4xHDR\n\
             leaf-1,2,gpu-02 mlx5_0,1,4xHDR\n\
             leaf-1,5,leaf-2,1,\n\
             leaf-2,2,gpu-09 mlx5_0,1,\n\
             leaf-1,6,leaf-2,6,\n",
            "plan.csv",
        )
        .unwrap();
        let d = compare(&plan, &f, None);
        assert_eq!(
            kinds(&d),
            [
                Difference::BelowRate,
                Difference::WrongPort,
                Difference::UnknownNode,
                Difference::Missing,
                Difference::Extra
            ],
            "{d:#?}"
        );
        assert!(
            d[0].message.contains("runs 2xHDR, planned 4xHDR"),
            "{}",
            d[0].message
        );
        assert!(
            d[1].message
                .contains("cabled to port 3 of \"leaf-1\" instead"),
            "{}",
            d[1].message
        );
        assert!(d[4].message.contains("gpu-03 mlx5_0"), "{}", d[4].message);
        // A port cabled to another node than planned.
        let plan = parse_csv(
            "a_node,a_port,z_node,z_port\nleaf-1,1,gpu-03 mlx5_0,1\n",
            "p",
        )
        .unwrap();
        let d = compare(&plan, &f, None);
        assert_eq!(d[0].kind, Difference::WrongNode, "{d:#?}");
        assert!(
            d[0].message
                .contains("goes to \"gpu-01 mlx5_0\"[1] instead"),
            "{}",
            d[0].message
        );
    }

    #[test]
    fn part_numbers_and_lengths_are_optional_columns_in_any_order() {
        let p = parse_csv(
            "a_node,a_port,z_node,z_port,length_m,part_number,rate\n\
             leaf-1,1,gpu-01 mlx5_0,1,3,MFS1S00-H003E,4xHDR\n\
             leaf-1,2,gpu-02 mlx5_0,1,,MCP1650-H002E26\n\
             leaf-1,3,leaf-2,1\n",
            "p",
        )
        .unwrap();
        assert_eq!(p[0].length_m, Some(3.0));
        assert_eq!(p[0].part_number.as_deref(), Some("MFS1S00-H003E"));
        assert_eq!(p[0].rate.map(|r| r.to_string()).as_deref(), Some("4xHDR"));
        assert_eq!((p[1].length_m, p[1].rate), (None, None));
        assert_eq!(p[1].part_number.as_deref(), Some("MCP1650-H002E26"));
        assert_eq!((&p[2].part_number, p[2].length_m), (&None, None));
        // Neither column changes how the cabling itself is compared: the one cable is as
        // planned, the fabric's other three are not in this plan.
        let f = ibnd::parse(FABRIC).unwrap();
        assert_eq!(
            kinds(&compare(&p[..1], &f, None)),
            [Difference::Extra, Difference::Extra, Difference::Extra]
        );
    }

    #[test]
    fn bad_plans_name_file_and_line_never_panic() {
        let e = |t: &str| parse_csv(t, "p.csv").unwrap_err().to_string();
        assert!(e("").contains("p.csv:1: empty plan"));
        assert!(e("node,port\n").contains("expected the header"));
        assert!(e("a_node,a_port,z_node,z_port\nx,0,y,1\n").starts_with("p.csv:2: a_port \"0\""));
        assert!(e("a_node,a_port,z_node,z_port\nx,1,y\n").contains("expected 4 fields"));
        assert!(e("a_node,a_port,z_node,z_port,rate\nx,1,y,1,fast\n").contains("rate \"fast\""));
        assert!(e("a_node,a_port,z_node,z_port\n\"x,1,y,1\n").contains("not closed"));
        assert!(e("a_node,a_port,z_node,z_port,colour\n").contains("expected the header"));
        assert!(e("a_node,a_port,z_node,z_port,rate,rate\n").contains("expected the header"));
        assert!(e("a_node,a_port,z_node,z_port,length_m\nx,1,y,1,far\n")
            .contains("p.csv:2: length_m \"far\" is not a length in metres"));
        // Quoted names with commas and quotes, comments and blank lines.
        let p = parse_csv(
            "# plan\na_node,a_port,z_node,z_port\n\n\"a, \"\"b\"\"\",1,c,2\n",
            "p",
        )
        .unwrap();
        assert_eq!(p[0].a.node, "a, \"b\"");
        assert_eq!(p[0].line, 4);
        let mut out = Vec::new();
        write_csv(&p, &mut out).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("\"a, \"\"b\"\"\",1,c,2,"));
    }
}
