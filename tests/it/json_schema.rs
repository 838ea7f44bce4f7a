//! Every command's `--json` output against its published schema (docs/json/, JSON Schema
//! draft 2020-12), on a simulated fabric with SHARP aggregation nodes and a degraded link,
//! offline on a generated XDR fabric and on every file of the real-data corpus.
//!
//! Beyond the schemas, every document is walked for what scripts rely on whatever the
//! schema says: every member whose name ends in `guid` a string "0x" + 16 hex digits, and
//! no integer a JSON reader would round (above 2^53; only a 64-bit counter of a
//! long-running fabric may be, never one of these fabrics).

use crate::common;

use std::path::{Path, PathBuf};

use common::schema::{assert_valid, schema_dir, untrustworthy, validator};
use common::*;
use serde_json::Value;

/// Names in the generated fat tree (node descriptions).
const LEAF: &str = "MF0;leaf-0001:MQM8790/U1";
const HOST1: &str = "gpu-node-0001 mlx5_0";
const HOST8: &str = "gpu-node-0008 mlx5_0";

/// Run, expect `code`, validate against `schema`.
fn checked(out: std::process::Output, code: i32, schema: &str, args: &[&str]) -> Vec<Value> {
    let what = format!("ibscope {}", args.join(" "));
    let text = assert_exit(&out, code);
    assert_valid(schema, &what, &text, schema == "counters")
}

/// Each schema is a valid draft 2020-12 schema, and the finding kinds it names are the
/// findings policy's, no more, no fewer.
#[test]
fn schemas_are_valid_and_name_every_finding_kind() {
    let mut names: Vec<String> = std::fs::read_dir(schema_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".schema.json").map(str::to_string))
        .collect();
    names.sort();
    for name in &names {
        validator(name);
    }
    for command in [
        "cables",
        "check",
        "config",
        "counters",
        "diff",
        "discover",
        "host",
        "hosts",
        "links",
        "nccl-log",
        "nccl-tests",
        "query",
        "route-check",
        "route-dump",
        "route-load",
        "route-trace",
        "sa",
        "sm",
    ] {
        assert!(
            names.iter().any(|n| n == command),
            "no schema for {command}"
        );
    }
    let common: Value = serde_json::from_str(
        &std::fs::read_to_string(schema_dir().join("common.schema.json")).unwrap(),
    )
    .unwrap();
    let in_schema: Vec<&str> = common["$defs"]["finding_kind"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let in_policy: Vec<&str> = ibscope_topo::findings::FINDING_KINDS
        .iter()
        .map(|k| k.name)
        .collect();
    assert_eq!(in_schema, in_policy);
    assert_eq!(
        common["$defs"]["schema_version"]["const"],
        ibscope_topo::model::SCHEMA_VERSION
    );
}

/// The walk finds what the schemas exist to prevent.
#[test]
fn untrustworthy_members_are_found() {
    let doc = serde_json::json!({
        "node_guid": 16185219092569541592u64,
        "ports": [{"guid": "0x9c05"}, {"port_guid": "0xe09d7303007a4bd8"}],
        "counter": 9007199254740993u64,
    });
    let mut found = Vec::new();
    untrustworthy(&doc, "", &mut found);
    assert_eq!(
        found,
        [
            ".node_guid = 16185219092569541592 is not a GUID string",
            ".node_guid = 16185219092569541592 is above 2^53",
            ".ports[0].guid = \"0x9c05\" is not a GUID string",
            ".counter = 9007199254740993 is above 2^53",
        ]
    );
    let bad_kind = serde_json::json!({
        "schema_version": ibscope_topo::model::SCHEMA_VERSION,
        "healthy": false, "nodes": 1, "links": 0, "counters_checked": false,
        "sm_checked": false, "links_without_rate": 0,
        "findings": [{"kind": "DegradedLink", "severity": "warning", "message": "m"}],
    });
    assert!(!validator("check").is_valid(&bad_kind));
}

/// A generated fat tree (4xHDR, one aggregation node per switch, one uplink at 1xHDR) under
/// the simulator: every command with --json, and a snapshot of it offline.
#[test]
fn every_command_on_the_simulator() {
    let dir = temp_dir();
    let topo = sim_gen(
        dir.path(),
        "ft.topo",
        &[
            "fat-tree",
            "--levels",
            "2",
            "--radix",
            "8",
            "--hosts",
            "8",
            "--aggregation-nodes",
            "--degrade",
            "L0001:5:1xHDR",
        ],
    );
    let sim = sim_with_sm_config(&topo, &["sweep_on_trap FALSE"]);
    let snap = dir.path().join("snap.json");
    let snap = snap.to_str().unwrap();
    let run =
        |args: &[&str], code: i32, schema: &str| checked(ibscope(&sim, args), code, schema, args);
    assert_exit(
        &ibscope(&sim, &["discover", "--lft", "--format", "json", "-o", snap]),
        0,
    );
    let file = std::fs::read_to_string(snap).unwrap();
    let snapshot = assert_valid("discover", "discover --lft --format json", &file, false);
    let kinds: Vec<&str> = snapshot[0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"aggregation-node"), "{kinds:?}");

    let links = run(&["links", "--json"], 0, "links");
    assert!(links[0]["links"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["b"]["kind"] == "aggregation-node" || l["a"]["kind"] == "aggregation-node"));
    let check = run(&["check", "--json"], 1, "check");
    assert!(check[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["kind"] == "degraded-link"));
    // Every rate, the newest generation included, is a rate --expect takes.
    run(&["check", "--json", "--expect", "4xXDR"], 1, "check");
    // A 16-bit counter at its maximum is written as {"value", "saturated"}, in the
    // sample and in the breakdown's finding alike.
    sim.set_counter("L0001", 1, "SymbolErrorCounter", 65535)
        .unwrap();
    sim.set_counter("L0001", 1, "PortRcvErrors", 65535).unwrap();
    let sample = run(&["counters", "--format", "json"], 0, "counters");
    let saturated = sample[0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|p| p["counters"]["SymbolErrorCounter"].as_object())
        .unwrap_or_else(|| panic!("no saturated counter: {:#}", sample[0]));
    assert_eq!(saturated["value"], 65535);
    assert_eq!(saturated["saturated"], true);
    run(
        &["counters", "--format", "json", "--details"],
        0,
        "counters",
    );
    let check = run(&["check", "--json"], 1, "check");
    assert!(
        check[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["saturated"] == true && f["details"].is_object()),
        "{:#}",
        check[0]
    );
    run(
        &[
            "counters",
            "--format",
            "json",
            "--interval",
            "0.2",
            "--count",
            "2",
        ],
        0,
        "counters",
    );
    let dump = run(&["route", "dump", LEAF, "--json"], 0, "route-dump");
    run(
        &["route", "trace", HOST1, HOST8, "--json"],
        0,
        "route-trace",
    );
    run(&["route", "check", "--json"], 0, "route-check");
    let load = run(
        &["route", "load", "--pattern", "ring", "--json"],
        0,
        "route-load",
    );
    // A ring over hosts only: the aggregation nodes stay out.
    assert_eq!(load[0]["hosts"], 8);
    // Job mode: every collective of the servers on their rails, the same schema.
    let job = run(
        &["route", "load", "--rails", "all", "--json"],
        0,
        "route-load",
    );
    assert_eq!(job[0]["hosts"], 8);
    assert_eq!(job[0]["collectives"].as_array().unwrap().len(), 3);
    run(&["sm", "--json"], 0, "sm");
    // A whole table arrives as one MAD under the simulator (no RMPP): part of it, exit 1.
    let nodes = run(&["sa", "nodes", "--json"], 1, "sa");
    assert_eq!(nodes[0]["complete"], false, "{:#}", nodes[0]);
    run(&["sa", "links", "--json"], 1, "sa");
    run(&["sa", "ports", "--json"], 1, "sa");
    // One record per LID: the aggregation node's says what it is.
    let aggregation_lid = snapshot[0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "aggregation-node")
        .and_then(|n| n["ports"][0]["lid"].as_u64())
        .unwrap()
        .to_string();
    let node = run(
        &["sa", "nodes", "--lid", &aggregation_lid, "--json"],
        0,
        "sa",
    );
    assert_eq!(node[0]["kind"], "aggregation-node", "{:#}", node[0]);
    run(&["sa", "nodes", "--lid", "1", "--json"], 0, "sa");
    run(
        &["sa", "paths", "--src", "1", "--dst", "2", "--json"],
        0,
        "sa",
    );
    for args in [
        ["query", "--json", "nodeinfo", "1"].as_slice(),
        &["query", "--json", "nodedesc", "1"],
        &["query", "--json", "portinfo", "1", "1"],
        &["query", "--json", "-D", "switchinfo", "0,1"],
        &["query", "--json", "-D", "nodeinfo", "0"],
    ] {
        run(args, 0, "query");
    }
    run(&["config", "show", "--json"], 0, "config");
    // Servers: the 8 hosts, the aggregation nodes not among them.
    let hosts = run(&["hosts", "--json"], 0, "hosts");
    assert_eq!(
        hosts[0]["hosts"].as_array().unwrap().len(),
        8,
        "{:#}",
        hosts[0]
    );
    // Several fabrics (-C all: here the one the simulator's shim offers): the envelope,
    // and each fabric's document against its command's schema, all naming one fabric.
    let mut named = std::collections::BTreeSet::new();
    for (args, code, schema) in [
        (&["-C", "all", "check", "--json"][..], 1, "check"),
        (&["-C", "all", "links", "--json"], 0, "links"),
        (
            &["-C", "all", "discover", "--format", "json"],
            0,
            "discover",
        ),
        (&["-C", "all", "hosts", "--json"], 0, "hosts"),
    ] {
        let doc = run(args, code, schema);
        let fabrics = doc[0]["fabrics"].as_array().unwrap();
        assert_eq!(fabrics.len(), 1, "{:#}", doc[0]);
        if schema == "hosts" {
            named.insert(fabrics[0]["fabric"]["name"].as_str().unwrap().to_string());
            continue;
        }
        named.insert(fabrics[0]["fabric"]["name"].as_str().unwrap().to_string());
        let mut one = fabrics[0].clone();
        one["schema_version"] = doc[0]["schema_version"].clone();
        assert_valid(schema, &args.join(" "), &one.to_string(), false);
    }
    let samples = run(
        &["-C", "all", "counters", "--format", "json"],
        0,
        "counters",
    );
    assert_eq!(samples.len(), 1);
    named.insert(samples[0]["fabric"]["name"].as_str().unwrap().to_string());
    assert_eq!(named.len(), 1, "{named:?}");
    assert!(named.iter().all(|n| n.starts_with("ibsim0:")), "{named:?}");
    // A host of --hosts no CA names: listed as missing, exit 1, the same schema.
    let hosts = run(
        &["hosts", "--hosts", "gpu-node-[0001,0099]", "--json"],
        1,
        "hosts",
    );
    assert_eq!(hosts[0]["missing"], serde_json::json!(["gpu-node-0099"]));
    // The uplink HOST1's traffic to HOST8 takes pulled, the SM not rerouting: the walk
    // breaks, and the same document says where, in words.
    let host8_lid = snapshot[0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["description"] == HOST8)
        .map(|n| n["ports"][0]["lid"].clone())
        .unwrap();
    let uplink = dump[0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["lid"] == host8_lid)
        .map(|e| e["port"].as_u64().unwrap() as u8)
        .unwrap();
    sim.unlink("L0001", uplink).unwrap();
    let broken = run(
        &["route", "trace", HOST1, &host8_lid.to_string(), "--json"],
        1,
        "route-trace",
    );
    let message = broken[0]["message"].as_str().unwrap();
    assert!(!message.contains('{'), "{message}");

    // The snapshot offline: the same documents without a fabric.
    let offline = |args: &[&str], code: i32, schema: &str| {
        let mut full = vec!["--topology", snap];
        full.extend_from_slice(args);
        checked(ibscope_plain(&full, &[]), code, schema, &full)
    };
    offline(&["links", "--json"], 0, "links");
    offline(&["check", "--json"], 1, "check");
    offline(&["hosts", "--json"], 0, "hosts");
    offline(
        &["route", "load", "--rails", "all", "--no-curve", "--json"],
        0,
        "route-load",
    );
    offline(&["route", "check", "--json"], 0, "route-check");
    offline(&["route", "dump", LEAF, "--json"], 0, "route-dump");
    offline(
        &["route", "trace", HOST1, HOST8, "--json"],
        0,
        "route-trace",
    );
    offline(
        &["route", "load", "--pattern", "ring", "--json"],
        0,
        "route-load",
    );
    let diff = ["diff", snap, &topo, "--json"];
    let d = checked(ibscope_plain(&diff, &[]), 0, "diff", &diff);
    // Only what a topology file does not carry may differ: nothing structural.
    assert_eq!(d[0]["links_added"], serde_json::json!([]));
}

/// Offline only: a generated XDR fabric with aggregation nodes (which ibsim cannot run),
/// every file of the real corpus, and `host` on a recorded machine.
#[test]
fn every_offline_command_on_files() {
    let dir = temp_dir();
    let xdr = sim_gen(
        dir.path(),
        "xdr.topo",
        &[
            "fat-tree",
            "--levels",
            "2",
            "--radix",
            "8",
            "--hosts",
            "8",
            "--rate",
            "4xXDR",
            "--aggregation-nodes",
        ],
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("tests/data/real"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ibnd"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    files.push(PathBuf::from(&xdr));
    for file in &files {
        offline_documents(file);
    }
    let links = offline_documents(Path::new(&xdr));
    assert!(links["links"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["active"] == "4xXDR"));

    let host = ["host", "--check", "--json"];
    let root = repo_root().join("tests/data/sysfs/dgx-h100");
    let out = ibscope_plain(&host, &[("IBSCOPE_SYSFS_ROOT", root.to_str().unwrap())]);
    let code = out.status.code().unwrap();
    assert!(code == 0 || code == 1, "{}", stderr(&out));
    checked(out, code, "host", &host);
    // Without --check: the machine only.
    let host = ["host", "--json"];
    let out = ibscope_plain(&host, &[("IBSCOPE_SYSFS_ROOT", root.to_str().unwrap())]);
    checked(out, 0, "host", &host);

    // Every published module capture that is a module's memory, decoded (the others are
    // refused before any document: tests/it/cables.rs).
    let dir = repo_root().join("tests/data/cables");
    for (file, code) in [
        ("sonic-sfputil-sff8472-finisar-ftlx8571d3bcl.txt", 0),
        ("sonic-sfputil-sff8636-molex-1110401054.txt", 0),
        ("netdev-mikrotik-s-ao0005-sfp-aoc.txt", 0),
    ] {
        let path = dir.join(file);
        let args = ["cables", "decode", "--json", path.to_str().unwrap()];
        checked(ibscope_plain(&args, &[]), code, "cables", &args);
    }
}

/// links, check, discover's snapshot and hosts of one topology file (exit 0 or 1: verdicts are
/// the corpus tests' concern); returns the links document.
fn offline_documents(file: &Path) -> Value {
    let path = file.to_str().unwrap();
    let mut links = Value::Null;
    for (args, schema) in [
        (["links", "--json"].as_slice(), "links"),
        (&["check", "--json"], "check"),
        (&["discover", "--format", "json"], "discover"),
        (&["hosts", "--json"], "hosts"),
    ] {
        let mut full = vec!["--topology", path];
        full.extend_from_slice(args);
        let out = ibscope_plain(&full, &[]);
        let code = out.status.code().unwrap();
        assert!(
            code == 0 || code == 1,
            "{}: exit {code}: {}",
            full.join(" "),
            stderr(&out)
        );
        let doc = checked(out, code, schema, &full).remove(0);
        if schema == "links" {
            links = doc;
        }
    }
    links
}

/// `nccl tests` and `nccl log` on every published NCCL capture (tests/data/nccl/real),
/// judged alone, against an HCA rate, and against the host documents of recorded
/// servers; `nccl log` on each. Exit 0 or 1 (verdicts are the capture tests' concern);
/// 2 only where a file holds nothing the command reads.
#[test]
fn nccl_documents_on_every_capture() {
    let dir = temp_dir();
    let root = repo_root().join("tests/data/sysfs/dgx-h100");
    let host = ibscope_plain(
        &["host", "--json"],
        &[("IBSCOPE_SYSFS_ROOT", root.to_str().unwrap())],
    );
    let doc = assert_exit(&host, 0);
    let hosts = dir.path().join("hosts.json");
    std::fs::write(&hosts, &doc).unwrap();
    let hosts = hosts.to_str().unwrap().to_string();
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("tests/data/nccl/real"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{files:?}");
    let mut read = 0;
    for file in &files {
        let path = file.to_str().unwrap();
        for (args, schema) in [
            (vec!["nccl", "tests", path, "--json"], "nccl-tests"),
            (
                vec![
                    "nccl", "tests", path, "--json", "--rate", "4xNDR", "--nics", "8",
                ],
                "nccl-tests",
            ),
            (
                vec!["nccl", "tests", path, "--json", "--host-json", &hosts],
                "nccl-tests",
            ),
            (vec!["nccl", "log", path, "--json"], "nccl-log"),
        ] {
            let mut full = args.clone();
            full.push("--no-fabric");
            let out = ibscope_plain(&full, &[]);
            let code = out.status.code().unwrap();
            assert!(
                (0..=2).contains(&code),
                "{}: exit {code}: {}",
                full.join(" "),
                stderr(&out)
            );
            if code == 2 {
                assert!(stderr(&out).starts_with("ibscope: "), "{}", stderr(&out));
                continue;
            }
            checked(out, code, schema, &full);
            read += 1;
        }
    }
    assert!(read >= 3 * files.len(), "{read} documents");
}
