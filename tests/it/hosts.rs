//! Hosts and rails on a generated rail-optimised GPU fabric under ibsim and OpenSM.
//!
//! - healthy: `hosts --json` groups every HCA into its server with its rail, leaf and leaf
//!   port; `check` is clean; `route load --rails all` predicts line-rate busbw with the
//!   HCA links as the limit.
//! - planted faults, through the simulator's console and the topology's rate comments:
//!   one HCA's link unlinked (and OpenSM resweeps), one rail degraded to 1x (rate
//!   comments on both ends), two HCAs of one server with each other's cables. `check`
//!   names each exactly (the whole finding list), and `route load --rails all` names the
//!   degraded link as the limit.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

/// 8 servers x 8 rails, 4 servers a leaf (2 leaves a rail), 16-port switches.
fn rails_topology(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "rails",
        "--hosts",
        "8",
        "--rails",
        "8",
        "--hosts-per-leaf",
        "4",
        "--radix",
        "16",
    ];
    args.extend_from_slice(extra);
    sim_gen(dir, "rails.topo", &args)
}

fn json(out: &std::process::Output, code: i32) -> Value {
    let text = assert_exit(out, code);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// HDR 4x: 200 Gb/s, 25 GB/s of data a link.
const LINE_GBYTES: f64 = 25.0;

/// The collective named `name` ("ring", "tree", "all-to-all") of a `route load` report.
fn collective<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collective"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report:#}"))
}

#[test]
fn healthy_rail_fabric_hosts_check_and_line_rate_collectives() {
    let dir = temp_dir();
    let topo = rails_topology(dir.path(), &[]);
    let sim = sim(&topo);

    let hosts = json(&ibscope(&sim, &["hosts", "--json"]), 0);
    assert_eq!(hosts["rails"], serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]));
    let list = hosts["hosts"].as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        (1..=8).map(|i| format!("gpu-{i:04}")).collect::<Vec<_>>()
    );
    for (h, host) in list.iter().enumerate() {
        assert_eq!(host["grouped_by"], "node-description", "{host:#}");
        let hcas = host["hcas"].as_array().unwrap();
        assert_eq!(hcas.len(), 8, "{host:#}");
        for (r, hca) in hcas.iter().enumerate() {
            // Server h is on port h % 4 + 1 of leaf h / 4 + 1 of each rail.
            assert_eq!(hca["device"], format!("mlx5_{r}"), "{hca:#}");
            assert_eq!(hca["rail"], r, "{hca:#}");
            assert_eq!(hca["rate"], "4xHDR", "{hca:#}");
            assert_eq!(hca["state"], "Active", "{hca:#}");
            assert!(hca["lid"].as_u64().unwrap() > 0, "{hca:#}");
            let leaf = &hca["leaf"];
            assert_eq!(
                leaf["name"],
                format!("MF0;leaf-r{r}-{:03}:MQM9700/U1", h / 4 + 1),
                "{hca:#}"
            );
            assert_eq!(leaf["port"], h % 4 + 1, "{hca:#}");
            assert_eq!(leaf["rail"], r, "{hca:#}");
        }
    }
    assert_eq!(hosts["findings"], serde_json::json!([]));
    // A subset by hostlist, and one name the fabric lacks.
    let some = json(
        &ibscope(
            &sim,
            &[
                "hosts",
                "--hosts",
                "gpu-[0002,0007-0008],gpu-0042",
                "--json",
            ],
        ),
        1,
    );
    let shown: Vec<&str> = some["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(shown, ["gpu-0002", "gpu-0007", "gpu-0008"]);
    assert_eq!(some["missing"], serde_json::json!(["gpu-0042"]));
    // The same servers, rails and leaf ports from the topology file alone.
    let offline = json(
        &ibscope_plain(&["--topology", &topo, "hosts", "--json"], &[]),
        0,
    );
    let layout = |report: &Value| -> Vec<(String, u64, String, u64)> {
        let mut out = Vec::new();
        for h in report["hosts"].as_array().unwrap() {
            for c in h["hcas"].as_array().unwrap() {
                out.push((
                    h["name"].as_str().unwrap().to_string(),
                    c["rail"].as_u64().unwrap(),
                    c["leaf"]["name"].as_str().unwrap().to_string(),
                    c["leaf"]["port"].as_u64().unwrap(),
                ));
            }
        }
        out
    };
    assert_eq!(layout(&offline), layout(&hosts));

    // links and counters JSON name each HCA end's host and rail (from "gpu-0003 mlx5_2").
    let expect_host_rail = |end: &Value| {
        if end["kind"] != "ca" {
            assert!(
                end.get("host").is_none() && end.get("rail").is_none(),
                "{end:#}"
            );
            return;
        }
        let (host, device) = end["node"].as_str().unwrap().split_once(' ').unwrap();
        assert_eq!(end["host"], host, "{end:#}");
        assert_eq!(
            end["rail"].to_string(),
            device.trim_start_matches("mlx5_"),
            "{end:#}"
        );
    };
    let links = json(&ibscope(&sim, &["links", "--json"]), 0);
    let mut ca_ends = 0;
    for l in links["links"].as_array().unwrap() {
        for end in [&l["a"], &l["b"]] {
            expect_host_rail(end);
            ca_ends += usize::from(end["kind"] == "ca");
        }
    }
    assert_eq!(ca_ends, 64);
    let counters = json(&ibscope(&sim, &["counters", "--format", "json"]), 0);
    let ports = counters["ports"].as_array().unwrap();
    for p in ports {
        expect_host_rail(p);
        if !p["remote"].is_null() {
            expect_host_rail(&p["remote"]);
        }
    }
    assert_eq!(ports.iter().filter(|p| p["kind"] == "ca").count(), 64);

    let check = json(&ibscope(&sim, &["check", "--json"]), 0);
    assert_eq!(check["findings"], serde_json::json!([]), "{check:#}");
    assert_eq!(check["hosts"], 8);

    // Every rail's ring at line rate: busbw = rails x 25 GB/s; the HCA links are the limit.
    let load = json(
        &ibscope(&sim, &["route", "load", "--rails", "all", "--json"]),
        0,
    );
    assert_eq!(load["hosts"], 8);
    assert_eq!(load["ranks"], 64);
    assert!(load["model"]["description"]
        .as_str()
        .unwrap()
        .starts_with("alpha-beta"));
    let ring = collective(&load, "ring");
    assert_eq!(ring["flows_unroutable"], 0, "{ring:#}");
    let busbw = ring["busbw"].as_f64().unwrap();
    assert!(
        (busbw - 8.0 * LINE_GBYTES).abs() < 1e-6,
        "ring busbw {busbw}: {ring:#}"
    );
    assert_eq!(ring["slowest_flow_gbps"], 200.0);
    let limit = &ring["limit"];
    assert_eq!(limit["hca_link"], true, "{limit:#}");
    assert_eq!(limit["below_norm"], false, "{limit:#}");
    // The nccl-tests sizes: 8 B to 16 GiB, doubling; busbw approaches the prediction.
    let curve = ring["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 32);
    assert_eq!(curve[0]["size"], 8);
    assert_eq!(curve[31]["size"], 16u64 << 30);
    let last = curve[31]["busbw"].as_f64().unwrap();
    assert!(last < busbw && last > 0.99 * busbw, "{last} vs {busbw}");
    for c in ["tree", "all-to-all"] {
        let c = collective(&load, c);
        assert_eq!(c["flows_unroutable"], 0, "{c:#}");
        assert!(c["busbw"].as_f64().unwrap() > 0.0, "{c:#}");
    }
    // A job from a file (as `scontrol show hostnames` writes it, or hostlists), in its
    // order; one rail, one collective.
    let file = dir.path().join("job-hosts");
    std::fs::write(&file, "# the job\ngpu-[0005-0006]\ngpu-0001 gpu-0002\n").unwrap();
    let job = json(
        &ibscope(
            &sim,
            &[
                "route",
                "load",
                "--hosts",
                &format!("@{}", file.display()),
                "--rails",
                "5",
                "--collective",
                "ring",
                "--json",
            ],
        ),
        0,
    );
    assert_eq!(
        job["host_names"],
        serde_json::json!(["gpu-0005", "gpu-0006", "gpu-0001", "gpu-0002"])
    );
    assert_eq!(job["rails"], serde_json::json!([5]));
    assert_eq!(job["collectives"].as_array().unwrap().len(), 1);
    // One rail's ring at line rate: 25 GB/s.
    let one = collective(&job, "ring");
    assert!(
        (one["busbw"].as_f64().unwrap() - LINE_GBYTES).abs() < 1e-6,
        "{one:#}"
    );
    // The text names the collectives and prints nccl-tests' columns.
    let text = assert_success(&ibscope(&sim, &["route", "load", "--rails", "0-3"]));
    assert!(
        text.contains("job: 8 servers (gpu-[0001-0008]), rails 0-3, 32 ranks"),
        "{text}"
    );
    assert!(
        text.contains("all_reduce (ring): busbw 100.00 GB/s"),
        "{text}"
    );
    assert!(
        text.contains("size         count      type   redop    root     time   algbw   busbw"),
        "{text}"
    );
}

/// The exact list `check` gives on the planted fabric: (kind, host, rail, the port it is
/// at, that port's number).
fn finding_list(check: &Value) -> Vec<(String, String, String, String, u64)> {
    let mut out: Vec<_> = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["host"].as_str().unwrap_or("").to_string(),
                f["rail"].as_u64().map_or(String::new(), |r| r.to_string()),
                f["at"]["node"].as_str().unwrap_or("").to_string(),
                f["at"]["port"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn planted_rail_faults_are_named_exactly() {
    let dir = temp_dir();
    // gpu-0003's rail 2 at 1x: the rate comment on both ends of its link.
    let topo = rails_topology(dir.path(), &["--degrade", "G0003R2:1:1xHDR"]);
    let sim = sim_with_sm_config(&topo, &["sweep_on_trap FALSE"]);
    // gpu-0002's rail 1: its link goes down.
    sim.unlink("G0002R1", 1).unwrap();
    // gpu-0004's rail 0 and rail 3 HCAs take each other's cables (port 4 of rail 0's and
    // rail 3's first leaves).
    sim.unlink("G0004R0", 1).unwrap();
    sim.unlink("G0004R3", 1).unwrap();
    sim.console("Link \"G0004R0\"[1] \"R3L001\"[4]").unwrap();
    sim.console("Link \"G0004R3\"[1] \"R0L001\"[4]").unwrap();
    sim.resweep().unwrap();

    let leaf = |rail: u8| format!("MF0;leaf-r{rail}-001:MQM9700/U1");
    let check = json(&ibscope(&sim, &["check", "--json"]), 1);
    let s = |t: &str| t.to_string();
    assert_eq!(
        finding_list(&check),
        vec![
            // The generic finding carries the host and rail of its CA end.
            (s("degraded-link"), s("gpu-0003"), s("2"), leaf(2), 3),
            (
                s("hcas-swapped"),
                s("gpu-0004"),
                s("0"),
                s("gpu-0004 mlx5_0"),
                1
            ),
            (s("rail-down"), s("gpu-0002"), s("1"), leaf(1), 2),
            (
                s("rail-slow"),
                s("gpu-0003"),
                s("2"),
                s("gpu-0003 mlx5_2"),
                1
            ),
        ],
        "{check:#}"
    );
    let text = assert_exit(&ibscope(&sim, &["check"]), 1);
    // Each line: the host and rail, the port (and its link's far end), what is wrong.
    for (head, port, tail) in [
        (
            format!("[rail-down] gpu-0002 rail 1: \"{}\" (0x", leaf(1)),
            " port 2 (lid ".to_string(),
            "Down: its HCA (mlx5_1) is not in the fabric (7 of 8 rails up); this port, where \
             its leaf-mates put it, has no link"
                .to_string(),
        ),
        (
            "[rail-slow] gpu-0003 rail 2: \"gpu-0003 mlx5_2\" (0x".to_string(),
            format!(" <-> \"{}\" (0x", leaf(2)),
            ": runs at 1xHDR, the host's other rails at 4xHDR".to_string(),
        ),
        (
            "[hcas-swapped] gpu-0004 rail 0: \"gpu-0004 mlx5_0\" (0x".to_string(),
            format!(" <-> \"{}\" (0x", leaf(3)),
            format!(
                ": swapped with mlx5_3 (rail 3), which is at \"{}\" port 4: swap their cables",
                leaf(0)
            ),
        ),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&head) && l.contains(&port) && l.ends_with(&tail)),
            "missing {head:?} ... {port:?} ... {tail:?} in\n{text}"
        );
    }
    assert!(text.contains("4 finding(s)"), "{text}");
    // With the job's host list: the one the fabric lacks is named too.
    let listed = json(
        &ibscope(&sim, &["check", "--hosts", "gpu-[0001-0009]", "--json"]),
        1,
    );
    let mut want = finding_list(&check);
    want.push((s("host-missing"), s("gpu-0009"), s(""), s(""), 0));
    want.sort();
    assert_eq!(finding_list(&listed), want, "{listed:#}");
    let missing = listed["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "host-missing")
        .unwrap();
    assert_eq!(
        missing["message"],
        "in the --hosts list, but no CA in the fabric names it"
    );

    // The job with the server whose rail is down: no prediction, and why.
    let out = ibscope(&sim, &["route", "load", "--rails", "all", "--no-curve"]);
    let text = assert_exit(&out, 1);
    assert!(
        text.contains("all_reduce (ring): no prediction: 2 of 64 flows cannot be placed"),
        "{text}"
    );
    assert!(text.contains("gpu-0002 has no HCA on rail 1"), "{text}");
    // Without it, the degraded link limits every rail's ring (each rail waits for the
    // slowest): 7 servers x 8 rails, 50 Gb/s on gpu-0003's rail 2.
    let load = json(
        &ibscope(
            &sim,
            &[
                "route",
                "load",
                "--hosts",
                "gpu-[0001,0003-0008]",
                "--rails",
                "all",
                "--json",
            ],
        ),
        0,
    );
    let ring = collective(&load, "ring");
    let limit = &ring["limit"];
    let ends = [&limit["channel"]["from"], &limit["channel"]["to"]];
    let named: Vec<(&str, u64)> = ends
        .iter()
        .map(|e| {
            (
                e["node"]["name"].as_str().unwrap(),
                e["port"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(
        named.contains(&("gpu-0003 mlx5_2", 1)) && named.contains(&(leaf(2).as_str(), 3)),
        "{limit:#}"
    );
    assert_eq!(limit["capacity_gbps"], 50.0, "{limit:#}");
    assert_eq!(limit["below_norm"], true, "{limit:#}");
    let busbw = ring["busbw"].as_f64().unwrap();
    assert!((busbw - 8.0 * 50.0 / 8.0).abs() < 1e-6, "{busbw}: {ring:#}");
    let text = assert_success(&ibscope(
        &sim,
        &[
            "route",
            "load",
            "--hosts",
            "gpu-[0001,0003-0008]",
            "--no-curve",
        ],
    ));
    assert!(
        text.contains("limit: a link slower than the job's HCA links"),
        "{text}"
    );
}

/// An HCA recabled to a free port of another rail's leaf (ibsim's console moves the
/// cable, OpenSM brings it up): `check` names the host, its rail and HCA and the switch
/// port it is on, and `hosts` shows it on that leaf.
#[test]
fn an_hca_on_another_rails_leaf_is_misaligned() {
    let dir = temp_dir();
    // 6 servers x 2 rails, 4 a leaf: ports 3 and 4 of each rail's second leaf are free.
    let topo = sim_gen(
        dir.path(),
        "rails.topo",
        &[
            "rails",
            "--hosts",
            "6",
            "--rails",
            "2",
            "--hosts-per-leaf",
            "4",
            "--radix",
            "8",
        ],
    );
    let sim = sim_with_sm_config(&topo, &["sweep_on_trap FALSE"]);
    sim.unlink("G0005R1", 1).unwrap();
    sim.console("Link \"G0005R1\"[1] \"R0L002\"[4]").unwrap();
    sim.resweep().unwrap();

    let leaf = "MF0;leaf-r0-002:MQM9700/U1";
    let check = json(&ibscope(&sim, &["check", "--json"]), 1);
    let found: Vec<&Value> = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"].as_str().unwrap().starts_with("rail-"))
        .collect();
    assert_eq!(found.len(), 1, "{check:#}");
    let f = found[0];
    assert_eq!(f["kind"], "rail-misaligned", "{f:#}");
    assert_eq!(
        (&f["host"], &f["rail"]),
        (&Value::from("gpu-0005"), &Value::from(1))
    );
    assert_eq!(f["message"], "cabled to a leaf of rail 0");
    assert_eq!(
        (&f["remote"]["node"], &f["remote"]["port"]),
        (&Value::from(leaf), &Value::from(4))
    );
    let hosts = json(&ibscope(&sim, &["hosts", "--json"]), 0);
    let hca = hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "gpu-0005")
        .and_then(|h| {
            h["hcas"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["rail"] == 1)
        })
        .unwrap()
        .clone();
    assert_eq!(
        (&hca["leaf"]["name"], &hca["leaf"]["port"]),
        (&Value::from(leaf), &Value::from(4))
    );
    assert_eq!(hca["leaf"]["rail"], 0, "{hca:#}");
}
