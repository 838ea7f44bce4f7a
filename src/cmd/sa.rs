//! `ibscope sa`: ask the Subnet Administrator (the SM's database) for records, the saquery
//! equivalent for single records.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ibscope_mad::engine::{Engine, Request};
use ibscope_mad::sa::{comp_mask, NodeRecord, PathRecord};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::NodeKind;
use serde_json::{json, Value};

use crate::cli::{exit, Global};
use crate::cmd::sm::{sa_error, NO_SM};
use crate::output;

/// Query the SA. Replies larger than one MAD (RMPP) are not reassembled, so every query
/// here is a SubnAdmGet of one record; listing all nodes asks once per LID.
///
/// Examples:
///   ibscope sa nodes                     # every node the SA knows, one query per LID
///   ibscope sa nodes --lid 12
///   ibscope sa paths --src 1 --dst 12 --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: SaCommand,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum SaCommand {
    /// NodeRecords: the node behind a LID (`saquery NR LID`); without --lid, one query per
    /// LID found by discovering the fabric.
    #[command(after_help = "Examples:\n  ibscope sa nodes\n  ibscope sa nodes --lid 0x0c --json")]
    Nodes {
        /// A LID (decimal or 0x-hex).
        #[arg(long, value_parser = parse_lid)]
        lid: Option<u16>,
    },
    /// The PathRecord the SA gives for SRC -> DST (`saquery -p --slid SRC --dlid DST`).
    #[command(
        after_help = "Examples:\n  ibscope sa paths --src 1 --dst 12\n  ibscope sa paths --src 1 --dst 12 --json"
    )]
    Paths {
        #[arg(long, value_parser = parse_lid)]
        src: u16,
        #[arg(long, value_parser = parse_lid)]
        dst: u16,
    },
}

fn parse_lid(s: &str) -> Result<u16, String> {
    output::parse_lid(s).map_err(|e| e.to_string())
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if g.topology.is_some() {
        bail!("`ibscope sa` asks the live SA; it does not work on a saved topology");
    }
    let mut engine = crate::fabric::open_engine(g)?;
    let sm_lid = engine.local().sm_lid;
    if sm_lid == 0 {
        bail!(NO_SM);
    }
    match &a.command {
        SaCommand::Nodes { lid: Some(lid) } => {
            let rec = node_record(&mut engine, sm_lid, *lid)?;
            let v = node_json(&rec);
            if a.json {
                output::print_json(&v)?;
            } else {
                print_node(&v);
            }
            Ok(ExitCode::SUCCESS)
        }
        SaCommand::Nodes { lid: None } => {
            let fabric =
                crate::fabric::discover_live(&mut engine, DiscoverOptions { read_lft: false })?;
            let mut lids: Vec<u16> = fabric
                .nodes()
                .flat_map(|(_, n)| {
                    n.ports
                        .iter()
                        .filter(|p| p.lid != 0 && (!n.is_switch() || p.number == 0))
                        .map(|p| p.lid)
                        .collect::<Vec<_>>()
                })
                .collect();
            lids.sort_unstable();
            lids.dedup();
            let (records, failures) = node_records(&mut engine, sm_lid, &lids);
            crate::fabric::ensure_connected(&engine)?;
            if a.json {
                let v = json!({
                    "records": records.iter().map(node_json).collect::<Vec<_>>(),
                    "failures": failures.iter().map(|(l, e)| json!({"lid": l, "error": e})).collect::<Vec<_>>(),
                });
                output::print_json(&v)?;
            } else {
                for r in &records {
                    print_node(&node_json(r));
                }
                for (l, e) in &failures {
                    println!("LID {l}: {}", for_terminal(e));
                }
            }
            Ok(ExitCode::from(if failures.is_empty() {
                exit::OK
            } else {
                exit::FINDINGS
            }))
        }
        SaCommand::Paths { src, dst } => {
            let rec = path_record(&mut engine, sm_lid, *src, *dst)?;
            let v = path_json(&rec);
            if a.json {
                output::print_json(&v)?;
            } else {
                output::print_fields(&v, 0);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn node_request(sm_lid: u16, lid: u16) -> Request {
    let template = NodeRecord {
        lid,
        ..Default::default()
    };
    Request::sa_get(sm_lid, comp_mask::node_record::LID, &template)
}

/// SubnAdmGet(NodeRecord) by LID.
pub fn node_record(engine: &mut Engine, sm_lid: u16, lid: u16) -> Result<NodeRecord> {
    let reply = engine
        .call(node_request(sm_lid, lid))
        .map_err(sa_error)
        .with_context(|| format!("SA NodeRecord query for LID {lid}"))?;
    Ok(reply.decode::<NodeRecord>()?)
}

/// One SubnAdmGet(NodeRecord) per LID, in the engine's window; results in LID order.
pub fn node_records(
    engine: &mut Engine,
    sm_lid: u16,
    lids: &[u16],
) -> (Vec<NodeRecord>, Vec<(u16, String)>) {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    engine.run(
        lids.iter().map(|&l| (l, node_request(sm_lid, l))),
        |lid, result, _| match result
            .map_err(sa_error)
            .and_then(|r| Ok(r.decode::<NodeRecord>()?))
        {
            Ok(rec) => ok.push(rec),
            Err(e) => failed.push((lid, format!("{e:#}"))),
        },
    );
    ok.sort_by_key(|r| r.lid);
    failed.sort();
    (ok, failed)
}

/// SubnAdmGet(PathRecord) with SLID, DLID and NumbPath 1.
pub fn path_record(engine: &mut Engine, sm_lid: u16, src: u16, dst: u16) -> Result<PathRecord> {
    use comp_mask::path_record as pr;
    let template = PathRecord {
        slid: src,
        dlid: dst,
        numb_path: 1,
        ..Default::default()
    };
    let reply = engine
        .call(Request::sa_get(
            sm_lid,
            pr::SLID | pr::DLID | pr::NUMB_PATH,
            &template,
        ))
        .map_err(sa_error)
        .with_context(|| format!("SA PathRecord query for LID {src} -> LID {dst}"))?;
    Ok(reply.decode::<PathRecord>()?)
}

pub fn node_json(r: &NodeRecord) -> Value {
    let ni = &r.node_info;
    let description = r.node_description.text();
    json!({
        "lid": r.lid,
        "node_type": ni.kind(),
        "node_type_code": ni.node_type,
        // As everywhere in ibscope: "ca", "switch", "router", "aggregation-node".
        "kind": NodeKind::classify(ni.kind(), &description).map(NodeKind::as_str),
        "num_ports": ni.num_ports,
        "system_image_guid": format!("{:#018x}", ni.system_image_guid),
        "node_guid": format!("{:#018x}", ni.node_guid),
        "port_guid": format!("{:#018x}", ni.port_guid),
        "partition_cap": ni.partition_cap,
        "device_id": ni.device_id,
        "revision": ni.revision,
        "local_port_num": ni.local_port_num,
        "vendor_id": ni.vendor_id,
        "node_description": description,
    })
}

fn print_node(v: &Value) {
    println!(
        "LID {:<5} {:<6} {} port {} ({} ports) {}",
        v["lid"],
        v["kind"].as_str().unwrap_or("?"),
        v["port_guid"].as_str().unwrap_or("?"),
        v["local_port_num"],
        v["num_ports"],
        for_terminal(v["node_description"].as_str().unwrap_or(""))
    );
}

/// A GID in IPv6 notation, as saquery prints it (`fe80::20:1`).
fn gid_text(g: &[u8; 16]) -> String {
    std::net::Ipv6Addr::from(*g).to_string()
}

pub fn path_json(p: &PathRecord) -> Value {
    json!({
        "service_id": format!("{:#018x}", p.service_id),
        "dgid": gid_text(&p.dgid),
        "sgid": gid_text(&p.sgid),
        "dlid": p.dlid,
        "slid": p.slid,
        "raw_traffic": p.raw_traffic,
        "flow_label": p.flow_label,
        "hop_limit": p.hop_limit,
        "traffic_class": p.traffic_class,
        "reversible": p.reversible,
        "numb_path": p.numb_path,
        "p_key": format!("{:#06x}", p.p_key),
        "qos_class": p.qos_class,
        "sl": p.sl,
        "mtu_selector": p.mtu_selector,
        "mtu": p.mtu,
        "mtu_bytes": ibscope_mad::attr::mtu_bytes(p.mtu),
        "rate_selector": p.rate_selector,
        "rate": p.rate,
        "rate_gbps": ibscope_mad::attr::link::sa_rate_gbps(p.rate),
        "packet_life_time_selector": p.packet_life_time_selector,
        "packet_life_time": p.packet_life_time,
        "preference": p.preference,
    })
}
