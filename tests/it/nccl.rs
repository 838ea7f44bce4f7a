//! `ibscope nccl tests` and `ibscope nccl log` on the demo's GPU cluster under ibsim: a
//! job's log and nccl-tests runs generated for its servers, with planted faults on the
//! fabric (symbol errors, a rail down) and on the hosts (GPUDirect RDMA off), each verdict
//! and each placement checked against what the routes and counters say.

use crate::common;

use common::*;
use ibscope_nccl::synthetic::{self, Job};
use serde_json::Value;
use std::time::Duration;

/// The job's servers: every server of the cluster but gpu-0006, whose rail 2 is down (a
/// rail-local ring cannot be placed through it).
fn job() -> Job {
    let mut job = Job::new(8, 8);
    job.hosts.remove(5);
    job
}

/// The command's JSON, valid against its schema (docs/json/SCHEMA.schema.json).
fn json(out: &std::process::Output, code: i32, schema: &str) -> Value {
    let text = assert_exit(out, code);
    common::schema::assert_valid(schema, schema, &text, false).remove(0)
}

/// busbw of a run with latency `latency_us` and bandwidth `busbw` GB/s, sizes 8 B to 4 GiB.
fn rows(latency_us: f64, busbw: f64, factor: f64) -> Vec<(u64, f64)> {
    (3..=32)
        .map(|p| 1u64 << p)
        .map(|s| {
            let bus = factor * s as f64;
            (s, bus / (latency_us * 1e-6 + bus / (busbw * 1e9)) / 1e9)
        })
        .collect()
}

#[test]
fn nccl_tests_runs_are_judged_against_the_routes() {
    let sim = sim("gpu-cluster.topo");
    let dir = temp_dir();
    let job = job();
    let ranks = 7.0 * 8.0;
    let factor = 2.0 * (ranks - 1.0) / ranks;
    // What the routes allow these servers: route load's ring prediction.
    let load = json(
        &ibscope(
            &sim,
            &[
                "route",
                "load",
                "--hosts",
                "gpu-[0001-0005],gpu-0007,gpu-0008",
                "--collective",
                "ring",
                "--no-curve",
                "--json",
            ],
        ),
        0,
        "route-load",
    );
    let allowed = load["collectives"][0]["busbw"].as_f64().unwrap();
    assert!(allowed > 10.0, "{load}");
    let write = |name: &str, busbw: f64| {
        let path = dir.path().join(name);
        let text = synthetic::perf_text(&job, "all_reduce", &rows(30.0, busbw, factor));
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };

    // At 95% of what the routes allow: the fabric is the limit, and the link is named.
    let at = write("all_reduce_perf.at.txt", 0.95 * allowed);
    let doc = json(
        &ibscope(&sim, &["nccl", "tests", &at, "--json"]),
        0,
        "nccl-tests",
    );
    let run = &doc["runs"][0];
    assert_eq!(run["servers"].as_array().unwrap().len(), 7, "{run}");
    assert!((run["prediction"]["busbw"].as_f64().unwrap() - allowed).abs() < 1e-6);
    let ranges = run["judgement"]["ranges"].as_array().unwrap();
    let verdicts: Vec<&str> = ranges
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        ["latency-bound", "at-fabric-limit"],
        "{ranges:#?}"
    );
    let says = ranges[1]["says"].as_str().unwrap();
    assert!(
        says.starts_with("at the fabric's limit") && says.contains(" -> "),
        "{says}"
    );
    let last = run["judgement"]["sizes"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        (last["ratio"].as_f64().unwrap() - 0.95).abs() < 0.02,
        "{last}"
    );

    // At 40%: far below, and the hosts are where to look; with the job's log, what it shows.
    let slow = write("all_reduce_perf.slow.txt", 0.4 * allowed);
    let text = assert_exit(&ibscope(&sim, &["nccl", "tests", &slow]), 1);
    assert!(text.contains("far below the fabric's limit"), "{text}");
    assert!(text.contains("look at the hosts: GPUDirect RDMA"), "{text}");
    let mut no_gdr = job.clone();
    no_gdr.no_gdr_host = Some(2);
    let log = dir.path().join("job.log");
    std::fs::write(&log, synthetic::log_text(&no_gdr)).unwrap();
    let svg = dir.path().join("busbw.svg");
    let text = assert_exit(
        &ibscope(
            &sim,
            &[
                "nccl",
                "tests",
                &slow,
                "--log",
                log.to_str().unwrap(),
                "--plot",
                svg.to_str().unwrap(),
            ],
        ),
        1,
    );
    assert!(
        text.contains("the log shows nccl-gdr-off (8 finding(s)"),
        "{text}"
    );
    assert!(
        text.contains("[nccl-gdr-off]") && text.contains("gpu-0003"),
        "{text}"
    );
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.matches("<polyline").count() == 2);

    // Without the fabric: the measured curve alone, nothing judged against routes.
    let doc = json(
        &ibscope(&sim, &["nccl", "tests", &slow, "--no-fabric", "--json"]),
        0,
        "nccl-tests",
    );
    let ranges = doc["runs"][0]["judgement"]["ranges"].as_array().unwrap();
    assert_eq!(ranges.last().unwrap()["verdict"], "no-prediction");
    assert!(doc["runs"][0]["prediction_missing"]
        .as_str()
        .unwrap()
        .contains("no fabric"));
}

#[test]
fn nccl_log_places_the_job_on_the_links_with_their_findings() {
    let sim = sim("gpu-cluster.topo");
    sim.set_counter("R4L001", 4, "SymbolErrorCounter", 1234)
        .unwrap();
    let dir = temp_dir();
    let log = dir.path().join("job.log");
    // Every server, gpu-0006 included: its rail 2 is down in the fabric.
    std::fs::write(&log, synthetic::log_text(&Job::new(8, 8))).unwrap();
    let doc = json(
        &ibscope(&sim, &["nccl", "log", log.to_str().unwrap(), "--json"]),
        1,
        "nccl-log",
    );
    assert_eq!(doc["ranks"], 64);
    assert_eq!(
        doc["findings"].as_array().unwrap().len(),
        0,
        "the hosts are fine"
    );
    let p = &doc["placement"];
    // 8 channels x 8 servers, rings and trees: 128 sends; gpu-0006's rail 2 ones are not.
    assert_eq!(
        p["placed"].as_u64().unwrap() + p["unplaced"].as_u64().unwrap(),
        128
    );
    assert_eq!(p["unplaced"], 4, "{p}");
    let reasons = p["unplaced_reasons"].to_string();
    assert!(
        reasons.contains("gpu-0006") || reasons.contains("LID 0"),
        "{reasons}"
    );
    let links = p["links"].as_array().unwrap();
    let faulty: Vec<&Value> = links
        .iter()
        .filter(|l| !l["findings"].as_array().unwrap().is_empty())
        .collect();
    // Both directions of the cable counting symbol errors, and of gpu-0003's HCA cabled to
    // rail 6's leaf; links with findings come first.
    assert_eq!(faulty.len(), 4, "{faulty:#?}");
    assert!(links[..4]
        .iter()
        .all(|l| !l["findings"].as_array().unwrap().is_empty()));
    let symbol = faulty
        .iter()
        .find(|l| l["link"]["from"]["node"]["name"] == "gpu-0004 mlx5_4")
        .expect("gpu-0004's rail 4 link");
    assert!(symbol["link"]["to"]["node"]["name"]
        .as_str()
        .unwrap()
        .contains("leaf-r4-001"));
    assert_eq!(symbol["link"]["to"]["port"], 4);
    assert_eq!(symbol["rings"], serde_json::json!([4]));
    assert!(
        symbol["findings"]
            .to_string()
            .contains("SymbolErrorCounter"),
        "{symbol}"
    );
    let misaligned = faulty
        .iter()
        .find(|l| l["link"]["from"]["node"]["name"] == "gpu-0003 mlx5_5")
        .expect("gpu-0003's rail 5 link");
    assert_eq!(misaligned["findings"][0]["kind"], "rail-misaligned");

    let text = assert_exit(&ibscope(&sim, &["nccl", "log", log.to_str().unwrap()]), 1);
    assert!(
        text.contains("job: 64 of 64 ranks on 8 server(s), NCCL 2.21.5+cuda12.4"),
        "{text}"
    );
    assert!(text.contains("ring channels 4; tree channels 4"), "{text}");
    assert!(text.contains("SymbolErrorCounter"), "{text}");

    // Read live while the job runs: symbol errors counted during the interval are named
    // on the link they rose on.
    let rises = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(600));
            sim.set_counter("R4L001", 4, "SymbolErrorCounter", 1300)
                .unwrap();
        });
        json(
            &ibscope(
                &sim,
                &[
                    "nccl",
                    "log",
                    log.to_str().unwrap(),
                    "--interval",
                    "2",
                    "--json",
                ],
            ),
            1,
            "nccl-log",
        )
    });
    let rose: Vec<&Value> = rises["placement"]["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| !l["counter_rises"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(rose.len(), 2, "both directions of the cable: {rose:#?}");
    assert!(
        rose[0]["counter_rises"][0]
            .as_str()
            .unwrap()
            .ends_with("[4] SymbolErrorCounter +66"),
        "{rose:#?}"
    );

    // Planted on the hosts: one GPU through another rail's HCA, checked with the fabric's
    // rails; and the run is still placed.
    let mut job = Job::new(8, 8);
    job.hca_of_gpu = Some((0, 3, 2));
    std::fs::write(&log, synthetic::log_text(&job)).unwrap();
    let doc = json(
        &ibscope(&sim, &["nccl", "log", log.to_str().unwrap(), "--json"]),
        1,
        "nccl-log",
    );
    let kinds: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["nccl-wrong-rail", "nccl-rail-unused"], "{doc:#}");
    assert_eq!(doc["findings"][0]["host"], "gpu-0001");
}

#[test]
fn bad_input_is_said_not_guessed() {
    let dir = temp_dir();
    let path = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let empty = path("empty.txt", b"");
    let out = ibscope_plain(&["nccl", "tests", &empty], &[]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("no nccl-tests run"),
        "{}",
        stderr(&out)
    );
    let binary = path("core", b"\x7fELF\0\0\0");
    let out = ibscope_plain(&["nccl", "log", &binary], &[]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("is binary data"), "{}", stderr(&out));
    let prose = path("notes.txt", b"the job was slow\n");
    let out = ibscope_plain(&["nccl", "log", &prose, "--no-fabric"], &[]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("no NCCL INFO line"),
        "{}",
        stderr(&out)
    );
    let out = ibscope_plain(&["nccl", "tests", &empty, "--op", "allreduce2"], &[]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("unknown collective"),
        "{}",
        stderr(&out)
    );

    // A run cut mid-row, with escapes in its host names: partial, said, exit 1, escaped.
    let job = Job {
        hosts: vec!["gpu-1\u{1b}[31m".into(), "gpu-2".into()],
        ..Job::new(2, 1)
    };
    let text = synthetic::perf_text(&job, "all_reduce", &rows(20.0, 10.0, 1.0));
    let cut = path("cut.txt", &text.as_bytes()[..text.len() * 2 / 3]);
    let out = ibscope_plain(&["nccl", "tests", &cut, "--no-fabric"], &[]);
    let shown = assert_exit(&out, 1);
    assert!(
        shown.contains("partial: ") && shown.contains("ended early"),
        "{shown}"
    );
    assert!(!shown.contains('\u{1b}'), "{shown}");
}

fn capture(name: &str) -> String {
    repo_root()
        .join("tests/data/nccl/real")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// `--help` of `nccl`, `nccl tests` and `nccl log` lists every finding of a job with its
/// fix, as the one table holds them.
#[test]
fn help_lists_every_job_finding_with_its_fix() {
    for args in [
        &["nccl", "--help"][..],
        &["nccl", "tests", "--help"],
        &["nccl", "log", "--help"],
    ] {
        let help = assert_exit(&ibscope_plain(args, &[]), 0);
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for k in ibscope_topo::findings::FINDING_KINDS
            .iter()
            .filter(|k| k.scope == ibscope_topo::findings::Scope::Job)
        {
            assert!(
                flat.contains(&format!("{} (", k.name)),
                "{args:?}: {}",
                k.name
            );
            let fix = k.fix.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(flat.contains(&fix), "{args:?}: the fix of {}", k.name);
        }
    }
}

/// A job whose ranks failed in bootstrap (published: nccl-tests issue 294) exits 1 with
/// the failure and its cause, from `nccl tests` (its output holds the log) and `nccl log`.
#[test]
fn a_job_that_did_not_start_exits_1() {
    let file = capture("nccl-log-2.18.3-2node-16rank-bootstrap-af-inet-mismatched-builds.txt");
    for cmd in ["tests", "log"] {
        let out = ibscope_plain(&["nccl", cmd, &file, "--no-fabric"], &[]);
        let text = assert_exit(&out, 1);
        assert!(text.contains("[nccl-init-failed]"), "{cmd}: {text}");
        assert!(text.contains("mismatched NCCL builds"), "{cmd}: {text}");
        assert!(text.contains("fix: read the first WARN"), "{cmd}: {text}");
    }
    // Processes that ran nccl-tests alone (nccl-tests issue 329): exit 1, named.
    let file =
        capture("nccl-tests-2.19.3-allreduce-2container-roce-two-single-runs-interleaved.txt");
    let text = assert_exit(
        &ibscope_plain(&["nccl", "tests", &file, "--no-fabric"], &[]),
        1,
    );
    assert!(text.contains("[nccl-tests-without-mpi]"), "{text}");
}

/// The servers' `ibscope host --json` documents stand in for the fabric: a recorded DGX
/// H100 as both servers of the published 155 GB/s run, its eight HCAs' rates as `host`
/// reads them (one of them trained at 4xHDR: 7 x 400 + 200 Gb/s), below what --rate
/// 4xNDR --nics 8 assumes, and the run far below either.
#[test]
fn host_documents_give_the_hcas_rate() {
    let dir = temp_dir();
    let root = repo_root().join("tests/data/sysfs/dgx-h100");
    let host = ibscope_plain(
        &["host", "--json"],
        &[("IBSCOPE_SYSFS_ROOT", root.to_str().unwrap())],
    );
    let mut doc: Value = serde_json::from_str(&assert_exit(&host, 0)).unwrap();
    let mut docs = String::new();
    for name in ["node005", "node007"] {
        doc["hostname"] = Value::from(name);
        docs.push_str(&doc.to_string());
        docs.push('\n');
    }
    let path = dir.path().join("hosts.jsonl");
    std::fs::write(&path, docs).unwrap();
    let run = capture("nccl-tests-allreduce-2node-h100-ndr-8nic-srun-label-155gbs.txt");
    let judged = |how: &[&str]| {
        let mut args = vec!["nccl", "tests", &run, "--no-fabric", "--json"];
        args.extend_from_slice(how);
        json(&ibscope_plain(&args, &[]), 1, "nccl-tests")
    };
    let by_docs = judged(&["--host-json", path.to_str().unwrap()]);
    let by_rate = judged(&["--rate", "4xNDR", "--nics", "8"]);
    let p = &by_docs["runs"][0]["prediction"];
    assert_eq!(p["basis"], "host-documents");
    assert_eq!(p["line_rate"]["hcas_per_server"], 8);
    let ports: f64 = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["ports"][0]["gbps"].as_f64().unwrap())
        .sum();
    assert_eq!(ports, 3000.0);
    assert_eq!(p["line_rate"]["server_gbps"], ports);
    let by_rate = &by_rate["runs"][0]["prediction"];
    assert_eq!(by_rate["basis"], "rate");
    assert_eq!(by_rate["line_rate"]["server_gbps"], 3200.0);
    assert!(p["busbw"].as_f64() < by_rate["busbw"].as_f64());
    let ranges = by_docs["runs"][0]["judgement"]["ranges"]
        .as_array()
        .unwrap();
    assert_eq!(ranges.last().unwrap()["verdict"], "below-fabric-limit");
    assert!(ranges.last().unwrap()["says"]
        .as_str()
        .unwrap()
        .starts_with("far below"));
}
