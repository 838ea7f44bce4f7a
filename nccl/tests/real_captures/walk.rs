//! Every capture of tests/data/nccl/real through every rule: per file, the findings and the
//! verdicts, against what its SOURCES.md entry says. Each diagnosis fires on the capture
//! whose thread names it; no diagnosis fires on a healthy capture.

use std::collections::BTreeSet;

use super::{capture_dir, judge, read};

/// What a capture's thread (SOURCES.md) says, and so what ibscope must say of it.
struct Expected {
    file: &'static str,
    /// The finding kinds of the output and its NCCL lines, each once.
    findings: &'static [&'static str],
    /// The HCA rate and HCAs per server the thread states (`--rate`, `--nics`), and the
    /// verdict of the largest size measured against them.
    rate: Option<(&'static str, usize, &'static str)>,
    /// Words of the file's SOURCES.md entry (its `Diagnosis:` line, else what it `Shows:`)
    /// that the findings answer.
    diagnosis: Option<&'static str>,
}

const fn healthy(file: &'static str) -> Expected {
    Expected {
        file,
        findings: &[],
        rate: None,
        diagnosis: None,
    }
}

const EXPECTED: &[Expected] = &[
    healthy("nccl-log-2.27.5-2node-16rank-roce-ofi-fallback-node1.txt"),
    healthy("nccl-log-2.27.5-2node-16rank-single-hca-pxn-node1.txt"),
    // 9 RoCE HCAs listed for 8 GPUs (NCCL_IB_HCA's prefix match admits mlx5_10): not one
    // HCA per GPU, so no rails; the job uses its 8.
    healthy("nccl-log-2.29.3-2node-16rank-roce-rank0-node.txt"),
    Expected {
        file: "nccl-log-2.4.8-8rank-roce-sriov-k8s-timestamp-tag-output.txt",
        findings: &["nccl-gpu-nic-distance"],
        rate: None,
        // The job completed and no fault is discussed, but NCCL itself prints four GPUs at
        // SYS from their NIC: a finding about the hosts, whatever the run's outcome.
        diagnosis: Some("four ranks at `CUDA Dev 0[1], IB NIC distance :  SYS`"),
    },
    Expected {
        file: "nccl-tests-2.16.5-gather-2node-1gpu-roce-and-ib-hcas-topo-dump.txt",
        findings: &["nccl-gdr-forced"],
        rate: None,
        diagnosis: Some("Forgot to pass `NCCL_NET_GDR_LEVEL`"),
    },
    healthy("nccl-tests-2.17.1-allreduce-2node-gh200-slow-nocxi-indented.txt"),
    healthy("nccl-tests-2.17.1-allreduce-2node-gh200-srun-indented.txt"),
    Expected {
        file: "nccl-tests-2.21.5-allreduce-2node-a100-hdr-gdr-level-sys-6gbs.txt",
        findings: &["nccl-gdr-forced"],
        // One ConnectX-6 HDR HCA per server.
        rate: Some(("4xHDR", 1, "below-fabric-limit")),
        diagnosis: Some("Why are you setting: NCCL_NET_GDR_LEVEL=SYS"),
    },
    healthy("nccl-tests-allgather-2node-b200-nccl2.26.6.txt"),
    healthy("nccl-tests-allgather-4node-b200-truncated.txt"),
    Expected {
        // One server: NVLink, not HCAs, bounds it; no prediction from a rate.
        rate: Some(("4xNDR", 8, "no-prediction")),
        diagnosis: Some("476GB/s looks to be in the expected range"),
        ..healthy("nccl-tests-allreduce-1node-h100-nvls-healthy.txt")
    },
    healthy("nccl-tests-allreduce-2node-h100-mixed-hash-prefix.txt"),
    Expected {
        rate: Some(("4xNDR", 8, "below-fabric-limit")),
        diagnosis: Some("46-48GB/s per NIC"),
        ..healthy("nccl-tests-allreduce-2node-h100-ndr-8nic-srun-label-155gbs.txt")
    },
    Expected {
        rate: Some(("4xNDR", 8, "below-fabric-limit")),
        diagnosis: Some("about a quarter of normal"),
        ..healthy("nccl-tests-allreduce-2node-h100-ndr-8nic-srun-label-ring-89gbs.txt")
    },
    healthy("nccl-tests-allreduce-2node-p4de-srun-label.txt"),
    healthy("nccl-tests-allreduce-p5-mpirun-stdout-prefix.txt"),
    Expected {
        // p5en.48xlarge: 16 x 200 Gb/s EFA.
        rate: Some(("200G", 16, "at-fabric-limit")),
        ..healthy("nccl-tests-allreduce-p5en-elided-rows.txt")
    },
    Expected {
        // "8x 200G HDR InfiniBand each".
        rate: Some(("4xHDR", 8, "at-fabric-limit")),
        ..healthy("nccl-tests-old-error-col-allreduce-2node-dgxa100-ib.txt")
    },
    healthy("nccl-tests-old-error-col-allreduce-2node-efa-nccl2.7.8-interleaved-info.txt"),
    healthy("nccl-tests-old-error-col-allreduce-2node-efa-nccl2.9.9-mpirun-prefix-full-info.txt"),
    Expected {
        // DGX A100: 8 x 200 Gb/s HDR.
        rate: Some(("4xHDR", 8, "at-fabric-limit")),
        ..healthy("nccl-tests-old-narrow-cols-allreduce-4node-dgxa100.txt")
    },
    healthy("nccl-tests-old-narrow-cols-allreduce-roce-k8s-erratic.txt"),
    Expected {
        file: "nccl-tests-allreduce-2node-h100-without-mpi-16-single-runs-interleaved.txt",
        findings: &["nccl-tests-without-mpi"],
        rate: None,
        diagnosis: Some("you didn't compile the nccl-tests binaries with `MPI=1`"),
    },
    Expected {
        file: "nccl-tests-2.19.3-allreduce-2container-roce-two-single-runs-interleaved.txt",
        findings: &["nccl-tests-without-mpi"],
        rate: None,
        diagnosis: Some("nccl-tests built without `MPI=1`"),
    },
    Expected {
        file: "nccl-log-2.18.3-2node-16rank-bootstrap-af-inet-mismatched-builds.txt",
        findings: &["nccl-init-failed"],
        rate: None,
        diagnosis: Some("different ranks running mismatched code"),
    },
    Expected {
        file: "nccl-log-2node-16rank-socket-finalize-accept-env-not-exported.txt",
        findings: &["nccl-init-failed"],
        rate: None,
        diagnosis: Some("you have to pass every env var on the command line with `-x <env>`"),
    },
    Expected {
        diagnosis: Some("match exactly with Google's official benchmarks"),
        ..healthy("nccl-tests-allgather-2node-h200-skypilot-head-prefix-mpirun-tag.txt")
    },
    Expected {
        // A tuning regression of NCCL's at 0.5-1.5 MB, not a fabric's: no rule names it.
        diagnosis: Some("Not a fabric fault"),
        ..healthy(
            "nccl-tests-2.18.3-allreduce-2node-h100nvl-slingshot-nccl2.30.5-small-size-drop.txt",
        )
    },
    Expected {
        // NCCL's default keeps GPUDirect off across sockets, rightly; the log prints no
        // GPU-NIC distance (the thread read it from nvidia-smi topo -m) and no rows.
        diagnosis: Some("NIC is attached to a different CPU socket"),
        ..healthy("nccl-log-2.21.5-2node-a100-hdr-gdr-off-cross-socket.txt")
    },
    Expected {
        // NCCL_NET_GDR_LEVEL=PXB is NCCL's default: nothing forced; 9 GB/s on one HDR HCA
        // is far below what it carries.
        rate: Some(("4xHDR", 1, "below-fabric-limit")),
        diagnosis: Some("The topology is still SYS"),
        ..healthy("nccl-tests-2.21.5-allreduce-2node-a100-hdr-gdr-level-pxb-nps4-9gbs.txt")
    },
    Expected {
        file: "nccl-tests-old-error-col-allreduce-4node-v100-tcp-100g-collapse-32mb.txt",
        findings: &["nccl-curve-collapse"],
        rate: None,
        diagnosis: Some("the performance is not good under 32M, 64M and 128M buckets"),
    },
];

/// A file's SOURCES.md entry; panics when the file has none, or the entry says no
/// `Diagnosis:`.
fn entry_of<'a>(sources: &'a str, file: &str) -> &'a str {
    let heading = format!("### {file}\n");
    let start = sources
        .find(&heading)
        .unwrap_or_else(|| panic!("SOURCES.md has no entry for {file}"));
    let entry = &sources[start + heading.len()..];
    let entry = &entry[..entry.find("\n### ").unwrap_or(entry.len())];
    assert!(
        entry.lines().any(|l| l.starts_with("- Diagnosis:")),
        "{file}: its SOURCES.md entry has no Diagnosis line"
    );
    entry
}

#[test]
fn every_rule_over_every_capture_says_what_its_thread_says() {
    let sources = read("SOURCES.md");
    let mut files: Vec<String> = std::fs::read_dir(capture_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f != "SOURCES.md")
        .collect();
    files.sort();
    let listed: BTreeSet<&str> = EXPECTED.iter().map(|e| e.file).collect();
    let present: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    assert_eq!(
        listed, present,
        "every capture has its expectation here, and only captures that exist"
    );
    assert!(files.len() >= 22, "{} captures", files.len());
    let mut failures = Vec::new();
    for e in EXPECTED {
        let entry = entry_of(&sources, e.file);
        if let Some(words) = e.diagnosis {
            assert!(entry.contains(words), "{}: SOURCES.md says {entry}", e.file);
        }
        let rate = e.rate.map(|(r, n, _)| (r, n));
        let j = judge(e.file, rate);
        let kinds: BTreeSet<&str> = j
            .tests
            .findings
            .iter()
            .chain(&j.tests.log_findings)
            .map(|f| f.kind.name())
            .collect();
        let verdicts: Vec<String> = j
            .tests
            .runs
            .iter()
            .flat_map(|r| &r.judgement.ranges)
            .map(|x| format!("{}..{} {}", x.from, x.to, x.verdict.as_str()))
            .collect();
        println!("{}: findings {kinds:?}; verdicts {verdicts:?}", e.file);
        for f in j.tests.findings.iter().chain(&j.tests.log_findings) {
            println!("    [{}] {}", f.kind.name(), f.message);
            assert!(!f.evidence.is_empty(), "{}: {f:?} cites no line", e.file);
        }
        let expected: BTreeSet<&str> = e.findings.iter().copied().collect();
        if kinds != expected {
            failures.push(format!("{}: {kinds:?}, expected {expected:?}", e.file));
        }
        if let Some((_, _, verdict)) = e.rate {
            let last = j
                .tests
                .runs
                .iter()
                .filter_map(|r| r.judgement.sizes.last())
                .next_back()
                .map(|s| s.verdict.as_str());
            if last != Some(verdict) {
                failures.push(format!(
                    "{}: largest size {last:?}, expected {verdict}",
                    e.file
                ));
            }
        }
        if e.findings.is_empty() && e.rate.is_none() {
            // A healthy capture judged alone: nothing below a limit, no finding.
            assert!(!verdicts.iter().any(|v| v.ends_with("below-fabric-limit")));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
