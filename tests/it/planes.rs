//! Planes of multi-plane HCA ports, end to end: two simulated fabrics that are the two
//! planes of one rail-optimised cluster, watched by one ibscope (`-C all`).
//!
//! Each plane is its own ibsim with its own OpenSM, reached through `ibscope agent` (one
//! simulated CA per process: see tests/it/multifabric.rs). Both planes are generated from the
//! same topology, and ibsim numbers GUIDs by a node's place in the file, so every HCA has
//! the same GUIDs in both: what a planarized HCA port shows, one port GUID in each plane.
//! The second plane gets its own subnet prefix, so the two are told apart as subnets.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

const PREFIX_B: &str = "0xfe80000000000002";

/// 4 servers x 2 rails, 2 servers a leaf; `extra` generator flags (e.g. `--degrade`).
fn plane_topology(dir: &Path, name: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "rails",
        "--hosts",
        "4",
        "--rails",
        "2",
        "--hosts-per-leaf",
        "2",
        "--radix",
        "8",
    ];
    args.extend_from_slice(extra);
    sim_gen(dir, name, &args)
}

fn plane_sim(topology: &str, prefix: Option<&str>) -> Sim {
    let mut opts = SimOptions::new(topology);
    opts.sm_config = vec!["sweep_on_trap FALSE".to_string()];
    if let Some(p) = prefix {
        opts.sm_config.push(format!("subnet_prefix {p}"));
    }
    sim_with(opts)
}

/// The command that runs `ibscope agent` on `sim` (in its client directory).
fn agent_command(sim: &Sim) -> String {
    let env: Vec<String> = sim
        .env()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "cd '{}' && exec env {} '{}' agent",
        sim.client_dir().display(),
        env.join(" "),
        ibscope_bin().display()
    )
}

fn config(dir: &Path, fabrics: &[(&str, &Sim)]) -> PathBuf {
    let mut text = String::new();
    for (name, sim) in fabrics {
        text.push_str(&format!(
            "[[fabric]]\nname = \"{name}\"\ncommand = \"{}\"\n\n",
            agent_command(sim)
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        ));
    }
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(config: &Path, args: &[&str]) -> std::process::Output {
    ibscope_plain(args, &[("IBSCOPE_CONFIG", config.to_str().unwrap())])
}

/// The document, checked against `schema` (docs/json/).
fn json(out: &std::process::Output, code: i32, schema: &str) -> Value {
    let text = assert_exit(out, code);
    common::schema::assert_valid(schema, schema, &text, false).remove(0)
}

/// Every finding of a `check -C all --json` document: (fabric, kind, host, rail).
fn findings(doc: &Value) -> Vec<(String, String, String, String)> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    };
    let mut out: Vec<_> = doc["fabrics"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["findings"].as_array().unwrap().iter())
        .map(|f| {
            (
                text(&f["fabric"]["name"]),
                text(&f["kind"]),
                text(&f["host"]),
                text(&f["rail"]),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn healthy_planes_agree_and_a_lost_or_slow_plane_is_named() {
    let dir = temp_dir();
    let topo = plane_topology(dir.path(), "plane.topo", &[]);
    let (a, b) = (plane_sim(&topo, None), plane_sim(&topo, Some(PREFIX_B)));
    let cfg = config(dir.path(), &[("alpha", &a), ("beta", &b)]);

    // Healthy: two fabrics, the same HCAs in both, nothing disagrees.
    let doc = json(&run(&cfg, &["-C", "all", "check", "--json"]), 0, "check");
    assert_eq!(doc["fabrics"].as_array().unwrap().len(), 2, "{doc:#}");
    assert_eq!(findings(&doc), vec![], "{doc:#}");

    // hosts: every HCA port of the 4 servers x 2 rails is in both planes, by (host, rail).
    let hosts = json(&run(&cfg, &["-C", "all", "hosts", "--json"]), 0, "hosts");
    let planes = hosts["planes"].as_array().unwrap();
    let seen: Vec<(String, u64, Vec<&str>)> = planes
        .iter()
        .map(|p| {
            (
                p["host"].as_str().unwrap().to_string(),
                p["rail"].as_u64().unwrap(),
                p["planes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x["fabric"]["name"].as_str().unwrap())
                    .collect(),
            )
        })
        .collect();
    let want: Vec<(String, u64, Vec<&str>)> = (1..=4)
        .flat_map(|h| (0..2).map(move |r| (format!("gpu-{h:04}"), r, vec!["alpha", "beta"])))
        .collect();
    assert_eq!(seen, want, "{hosts:#}");
    assert!(planes.iter().all(|p| p.get("missing").is_none()));
    assert_eq!(hosts["findings"], Value::Array(vec![]), "{hosts:#}");
    drop(b);

    // Plane beta again, with gpu-0003's rail 1 at 1x; then gpu-0002's rail 0 link in it
    // goes down (and its OpenSM resweeps; gpu-0001's rail 0 is where OpenSM runs).
    let slow = plane_topology(dir.path(), "slow.topo", &["--degrade", "G0003R1:1:1xHDR"]);
    let b = plane_sim(&slow, Some(PREFIX_B));
    b.unlink("G0002R0", 1).unwrap();
    b.resweep().unwrap();
    let cfg = config(dir.path(), &[("alpha", &a), ("beta", &b)]);
    let doc = json(&run(&cfg, &["-C", "all", "check", "--json"]), 1, "check");
    let s = |t: &str| t.to_string();
    assert_eq!(
        findings(&doc),
        vec![
            // What plane beta shows on its own: a slow link, a rail down, a rail slow.
            (s("beta"), s("degraded-link"), s("gpu-0003"), s("1")),
            // And what the planes together show: each HCA port's plane that disagrees.
            (s("beta"), s("planes-disagree"), s("gpu-0002"), s("0")),
            (s("beta"), s("planes-disagree"), s("gpu-0003"), s("1")),
            (s("beta"), s("rail-down"), s("gpu-0002"), s("0")),
            (s("beta"), s("rail-slow"), s("gpu-0003"), s("1")),
        ],
        "{doc:#}"
    );
    let reports = doc["fabrics"].as_array().unwrap();
    // Each fabric's report is a check document (the finding kind in the schema's list).
    for r in reports {
        let mut one = r.clone();
        one["schema_version"] = doc["schema_version"].clone();
        common::schema::assert_valid("check", "a fabric of check -C all", &one.to_string(), false);
    }
    assert_eq!(reports[0]["healthy"], true, "{doc:#}");
    assert_eq!(reports[1]["healthy"], false);
    let planes: Vec<&Value> = reports[1]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "planes-disagree")
        .collect();
    let message = |host: &str| {
        planes.iter().find(|f| f["host"] == host).unwrap()["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let lost = message("gpu-0002");
    assert!(
        lost.starts_with("mlx5_0 is missing from plane beta (port GUID 0x")
            && lost.ends_with(
                "): its port is in alpha but not in this plane; this port, where its \
                 leaf-mates put it, has no link"
            ),
        "{lost}"
    );
    let slow = message("gpu-0003");
    assert!(
        slow.starts_with("plane beta (port GUID 0x")
            && slow.ends_with(") runs at 1xHDR, its other planes at 4xHDR"),
        "{slow}"
    );

    // Text: the plane lines name their fabric, and the exit code says findings.
    let text = assert_exit(&run(&cfg, &["-C", "all", "check"]), 1);
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("beta: [planes-disagree]"))
            .count(),
        2,
        "{text}"
    );
    assert!(!text.contains("alpha: [planes-disagree]"), "{text}");

    // hosts: gpu-0002's rail 0 is missing from plane beta; the same findings.
    let hosts = json(&run(&cfg, &["-C", "all", "hosts", "--json"]), 0, "hosts");
    let lost = hosts["planes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host"] == "gpu-0002" && p["rail"] == 0)
        .unwrap();
    assert_eq!(lost["missing"], serde_json::json!(["beta"]), "{hosts:#}");
    assert_eq!(lost["planes"].as_array().unwrap().len(), 1);
    let kinds: Vec<(String, String)> = hosts["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "planes-disagree")
        .map(|f| {
            (
                f["host"].as_str().unwrap().into(),
                f["fabric"]["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("gpu-0002".to_string(), "beta".to_string()),
            ("gpu-0003".to_string(), "beta".to_string())
        ]
    );
    let text = assert_exit(&run(&cfg, &["-C", "all", "hosts"]), 0);
    let row = text
        .lines()
        .find(|l| l.starts_with("gpu-0002") && l.contains(" beta ") && l.contains("missing"))
        .unwrap_or_else(|| panic!("no missing plane row:\n{text}"));
    assert!(row.contains("mlx5_0"), "{row}");
    drop((a, b));
}

/// `serve -C all` over the two planes: every HCA port series carries its plane (the
/// `fabric` label) with its host and rail, so each (host, rail, plane) of `hosts` is one
/// label set on the page, in both planes; and the planes that disagree are counted on
/// their plane's page as `check -C all` finds them.
#[test]
fn serve_labels_each_planes_series_and_counts_the_planes_that_disagree() {
    use common::net::*;
    use std::collections::BTreeSet;

    let dir = temp_dir();
    let topo = plane_topology(dir.path(), "plane.topo", &[]);
    let (a, b) = (plane_sim(&topo, None), plane_sim(&topo, Some(PREFIX_B)));
    let cfg = config(dir.path(), &[("alpha", &a), ("beta", &b)]);
    let log = dir.path().join("serve.log");
    let port = free_port();
    let mut serve = start_serve_all(&cfg, &log, port);
    wait_every_fabric_healthy(&mut serve, port, &log, "both planes swept");
    let (code, page) = get(port, "/metrics");
    assert_eq!(code, 200);
    let report = promtool_check(&page);
    assert!(report.passed(), "{}", report.report);

    let label = |line: &str, key: &str| -> Option<String> {
        let start = line.find(&format!("{key}=\""))? + key.len() + 2;
        let len = line[start..].find('"')?;
        Some(line[start..start + len].to_string())
    };
    let mut seen = BTreeSet::new();
    let ca_series: Vec<&str> = page
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("kind=\"ca\"") && l.contains(",port=\""))
        .collect();
    assert!(!ca_series.is_empty(), "{page}");
    for l in &ca_series {
        let (Some(fabric), Some(host), Some(rail)) =
            (label(l, "fabric"), label(l, "host"), label(l, "rail"))
        else {
            panic!("an HCA port series without its plane, host and rail: {l}");
        };
        // The node's own description agrees with the labels ("gpu-0003 mlx5_1").
        assert_eq!(
            label(l, "node_name"),
            Some(format!("{host} mlx5_{rail}")),
            "{l}"
        );
        seen.insert((host, rail, fabric));
    }
    let want: BTreeSet<(String, String, String)> = (1..=4)
        .flat_map(|h| {
            (0..2).flat_map(move |r| {
                ["alpha", "beta"].map(|p| (format!("gpu-{h:04}"), r.to_string(), p.to_string()))
            })
        })
        .collect();
    assert_eq!(seen, want);
    let planes_found = |page: &str, fabric: &str| {
        sample_value(
            page,
            "ibscope_findings",
            &[("fabric", fabric), ("kind", "planes-disagree")],
        )
    };
    assert_eq!(planes_found(&page, "alpha"), Some(0.0));
    assert_eq!(planes_found(&page, "beta"), Some(0.0));
    let pid = serve.pid();
    drop(serve);
    assert_all_gone(&[pid]);
    drop(b);

    // Plane beta again with gpu-0003's rail 1 at 1x and gpu-0002's rail 0 link down: the
    // two planes-disagree findings of `check -C all` are counted on beta's page, none on
    // alpha's (each fabric's sweeper sees only its own fabric; serve compares them).
    let slow = plane_topology(dir.path(), "slow.topo", &["--degrade", "G0003R1:1:1xHDR"]);
    let b = plane_sim(&slow, Some(PREFIX_B));
    b.unlink("G0002R0", 1).unwrap();
    b.resweep().unwrap();
    let cfg = config(dir.path(), &[("alpha", &a), ("beta", &b)]);
    let check = json(&run(&cfg, &["-C", "all", "check", "--json"]), 1, "check");
    let theirs = findings(&check)
        .iter()
        .filter(|f| f.1 == "planes-disagree")
        .count();
    assert_eq!(theirs, 2, "{check:#}");
    let mut serve = start_serve_all(&cfg, &log, port);
    // Beta's count can be on the page before alpha's first sweep is: serve counts planes
    // from each fabric's discovery, held from before its first counter sweep.
    let page = wait_for(
        std::time::Duration::from_secs(30),
        "beta's planes counted and alpha's page there",
        || {
            serve.assert_running(&log);
            let (_, page) = http_get(port, "/metrics").ok()?;
            let counted = planes_found(&page, "beta") == Some(theirs as f64);
            (counted && planes_found(&page, "alpha").is_some()).then_some(page)
        },
    );
    assert_eq!(planes_found(&page, "alpha"), Some(0.0), "{page}");
    let report = promtool_check(&page);
    assert!(report.passed(), "{}", report.report);
    let pid = serve.pid();
    drop(serve);
    assert_all_gone(&[pid]);
    drop((a, b));
}
