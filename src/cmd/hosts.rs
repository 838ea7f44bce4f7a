//! `ibscope hosts`: the servers of a GPU cluster, each HCA with its rail and leaf port.

use std::process::ExitCode;

use anyhow::Result;
use ibscope_mad::attr::link::Rate;
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::findings::{self, Finding};
use ibscope_topo::health;
use ibscope_topo::hosts::planes::{PlaneView, PlanedPort};
use ibscope_topo::hosts::{self, Host, Hosts, RailIssue};
use serde::Serialize;

use crate::cli::{exit, Global};

/// Every server with its HCAs: rail, LID, rate, state, and the leaf switch and port each
/// is cabled to.
///
/// Servers are CAs grouped by the hostname in their NodeDescription, as rdma-ndd writes
/// it ("%h %d": `gpu-0042 mlx5_3`), a node-name-map name counting as the description;
/// a CA whose description names no host (the firmware's `MT4129 ConnectX7 ...`) joins the
/// server of a named CA with its SystemImageGUID, else stands alone, named by it. SHARP
/// aggregation nodes and switches' own CAs are no servers.
///
/// A rail is the device's index: mlx5_3 is rail 3 (mlx4_1, HCA-6 alike). A bonded
/// device (mlx5_bond_0) has no rail. Devices named by PCI location (ibp12s0, ibP1p12s0f1)
/// are ranked by address within their server, each address taking the rank most servers
/// give it. A leaf's rail is that of most HCAs cabled to it; in a rail-optimised fabric
/// every HCA of a leaf shares it. A rail missing from a server (its HCA is not in the
/// fabric, e.g. its link is down) is listed as `missing`, with the leaf port it belongs
/// on when its neighbours show it. `ibscope check` reports what is wrong.
///
/// Planes (-C all or a list naming several fabrics): each fabric's hosts as above, then
/// the planes of multi-plane HCA ports: a host CA port GUID found in more than one fabric
/// is one HCA port seen in each of its planes, listed as (host, rail, plane), a plane the
/// port is missing from as `missing`, and what disagrees as planes-disagree findings.
///
/// Exit code: 0; 1 when a host of --hosts is not in the fabric; 2 when a fabric could not
/// be read.
///
/// Examples:
///   ibscope hosts
///   ibscope hosts --hosts gpu-[0001-0016]
///   ibscope -C all hosts
///   ibscope --topology fabric.json hosts --json | jq '.hosts[] | select(.name == "gpu-0042")'
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only these hosts: a Slurm hostlist (gpu-[0001-0064]) or @FILE.
    #[arg(long, value_name = "HOSTLIST")]
    pub hosts: Option<String>,
    /// Print JSON: hosts, their HCAs and leaf ports, leaves, and the host findings.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
}

/// One leaf in the JSON.
#[derive(Debug, Serialize)]
struct LeafOut {
    name: String,
    #[serde(with = "ibscope_mad::codes::guid")]
    node_guid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rail: Option<u8>,
    hcas: usize,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    /// Every rail an HCA is on.
    rails: Vec<u8>,
    hosts: Vec<&'a Host>,
    leaves: Vec<LeafOut>,
    /// Hosts of --hosts no CA names.
    missing: Vec<String>,
    /// The host and rail findings of `check` (of the hosts shown).
    findings: Vec<Finding>,
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let names = crate::fabric::names(g)?;
    let wanted = a
        .hosts
        .as_deref()
        .map(crate::fabric::host_list)
        .transpose()?;
    if g.topology.is_none() && crate::fabric_set::is_multi(g.ca.as_deref()) {
        return run_planes(g, a, names.as_ref(), wanted.as_deref());
    }
    let fabric = crate::fabric::load(g, DiscoverOptions::default())?;
    let names = names.as_ref();
    let all = Hosts::group(&fabric, names);
    let issues = hosts::check(&fabric, &all);
    let mut found = findings::host_findings(&fabric, names, &all, wanted.as_deref());
    findings::annotate(&mut found, &all);
    let selection = hosts::Selection::of(&all, wanted.as_deref());
    found.retain(|f| f.host.as_deref().is_some_and(|h| selection.names(&all, h)));
    let hosts::Selection { shown, missing } = selection;
    let code = crate::output::verdict(if missing.is_empty() {
        exit::OK
    } else {
        exit::FINDINGS
    });
    if a.json {
        let report = Report {
            rails: all.rails(),
            hosts: shown.iter().map(|&i| &all.hosts()[i]).collect(),
            leaves: all
                .leaves()
                .map(|l| {
                    let node = fabric.node(l.node);
                    LeafOut {
                        name: ibscope_topo::namemap::display_name(node, names).to_string(),
                        node_guid: node.guid,
                        rail: l.rail,
                        hcas: l.hcas,
                    }
                })
                .collect(),
            missing: missing.clone(),
            findings: found,
        };
        crate::output::print_fabric_json(fabric.id.as_ref(), &report)?;
    } else {
        print_text(&fabric, names, &all, &issues, &shown, &missing)?;
    }
    Ok(ExitCode::from(code))
}

/// One table row.
type Row = hosts::TableRow;

fn print_text(
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    all: &Hosts,
    issues: &[RailIssue],
    shown: &[usize],
    missing: &[String],
) -> std::io::Result<()> {
    let rails = all.rails();
    let leaves: Vec<_> = all.leaves().collect();
    let railed = leaves.iter().filter(|l| l.rail.is_some()).count();
    println!(
        "# {} hosts, {} HCA ports; rails {}; {} leaves, {railed} of them with a rail",
        shown.len(),
        shown
            .iter()
            .map(|&i| all.hosts()[i].hcas.len())
            .sum::<usize>(),
        if rails.is_empty() {
            "none known".to_string()
        } else {
            hosts::rail_ranges(&rails)
        },
        leaves.len()
    );
    let mut rows: Vec<Row> = vec![[
        "HOST",
        "RAIL",
        "HCA",
        "PORT",
        "LID",
        "RATE",
        "STATE",
        "LEAF",
        "LEAF-PORT",
    ]
    .map(str::to_string)];
    for &h in shown {
        rows.extend(hosts::table_rows(fabric, names, all, issues, h));
    }
    crate::output::write_columns(&mut std::io::stdout().lock(), &rows)?;
    for m in missing {
        println!("{}: not in the fabric", for_terminal(m));
    }
    Ok(())
}

/// One fabric's hosts in the JSON of several.
#[derive(Debug, Serialize)]
struct FabricHosts<'a> {
    fabric: ibscope_topo::FabricId,
    rails: Vec<u8>,
    hosts: Vec<&'a Host>,
}

#[derive(Debug, Serialize)]
struct PlanesReport<'a> {
    fabrics: Vec<FabricHosts<'a>>,
    /// HCA ports seen in more than one fabric: (host, rail, plane).
    planes: Vec<&'a PlanedPort>,
    /// Each fabric's host findings (with its name) and the planes-disagree findings.
    findings: Vec<Finding>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    failed: Vec<crate::fabric_set::Failed>,
}

/// `hosts` over several fabrics: each one's hosts, then the planes they share.
fn run_planes(
    g: &Global,
    a: &Args,
    names: Option<&ibscope_topo::namemap::NameMap>,
    wanted: Option<&[String]>,
) -> Result<ExitCode> {
    let mut swept: Vec<(String, ibscope_topo::Fabric, Hosts)> = Vec::new();
    let ran = crate::fabric_set::each(g, |opened, _| {
        let mut fabric =
            crate::fabric::discover_live(&mut opened.engine, DiscoverOptions::default())?;
        fabric.id = Some(opened.id.clone());
        let hosts = Hosts::group(&fabric, names);
        swept.push((opened.id.name.clone(), fabric, hosts));
        Ok(exit::OK)
    })?;
    let keep = |host: &str| wanted.map_or(true, |w| w.iter().any(|h| h == host));
    let views: Vec<PlaneView> = swept.iter().map(PlaneView::from).collect();
    let planes = findings::planes_disagree(&views, names);
    let ports = planes.ports;
    let mut found = findings::host_findings_of_each(&views, names);
    found.extend(planes.findings);
    found.retain(|f| f.host.as_deref().is_some_and(keep));
    let shown: Vec<&PlanedPort> = ports.iter().filter(|p| keep(&p.host)).collect();
    let missing: Vec<String> = wanted
        .unwrap_or_default()
        .iter()
        .filter(|h| views.iter().all(|v| v.hosts.find(h).is_none()))
        .cloned()
        .collect();
    let own = crate::output::verdict(if missing.is_empty() {
        exit::OK
    } else {
        exit::FINDINGS
    });
    if a.json {
        let report = PlanesReport {
            fabrics: views
                .iter()
                .map(|v| FabricHosts {
                    fabric: v.id(),
                    rails: v.hosts.rails(),
                    hosts: v.hosts.hosts().iter().filter(|h| keep(&h.name)).collect(),
                })
                .collect(),
            planes: shown,
            findings: found,
            failed: ran.failed.clone(),
        };
        crate::output::print_json(&report)?;
    } else {
        for v in &views {
            println!("# fabric {}", for_terminal(v.name));
            let issues = hosts::check(v.fabric, v.hosts);
            let shown_hosts: Vec<usize> = (0..v.hosts.len())
                .filter(|&i| keep(&v.hosts.hosts()[i].name))
                .collect();
            print_text(v.fabric, names, v.hosts, &issues, &shown_hosts, &[])?;
        }
        print_planes(&shown)?;
        for f in &found {
            let fabric = f.fabric_name().unwrap_or_default();
            println!("{}: {}", for_terminal(fabric), f.text_line());
        }
        for m in &missing {
            println!("{}: not in any fabric", for_terminal(m));
        }
    }
    Ok(ExitCode::from(own.max(ran.worst)))
}

/// The planes table: a row per (host, rail, plane), `missing` where the port is not in a
/// plane its host has.
fn print_planes(ports: &[&PlanedPort]) -> std::io::Result<()> {
    let planes: usize = ports.iter().map(|p| p.planes.len()).sum();
    println!(
        "# planes: {} HCA ports in more than one fabric, {planes} planes",
        ports.len()
    );
    let mut rows: Vec<[String; 8]> = vec![[
        "HOST",
        "RAIL",
        "HCA",
        "PORT-GUID",
        "PLANE",
        "RATE",
        "STATE",
        "LEAF-PORT",
    ]
    .map(str::to_string)];
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for p in ports {
        let device = p.planes.iter().find_map(|x| x.device.as_deref());
        for x in &p.planes {
            rows.push([
                for_terminal(&p.host),
                opt(p.rail.map(|r| r.to_string())),
                opt(device.map(for_terminal)),
                ibscope_mad::codes::guid::text(p.port_guid),
                for_terminal(&x.fabric.name),
                Rate::text_of(x.rate),
                health::state_text(x.state, x.phys_state),
                x.leaf.as_ref().map_or("-".into(), |l| {
                    format!("\"{}\" port {}", for_terminal(&l.name), l.port)
                }),
            ]);
        }
        for m in &p.missing {
            rows.push([
                for_terminal(&p.host),
                opt(p.rail.map(|r| r.to_string())),
                opt(device.map(for_terminal)),
                ibscope_mad::codes::guid::text(p.port_guid),
                for_terminal(m),
                "-".into(),
                "missing".into(),
                "-".into(),
            ]);
        }
    }
    crate::output::write_columns(&mut std::io::stdout().lock(), &rows)
}
