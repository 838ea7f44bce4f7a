//! `ibscope host` on sysfs trees of real layouts (tests/data/sysfs, written by its
//! make-fixtures.sh) through IBSCOPE_SYSFS_ROOT, and on this machine, which has no RDMA
//! device: the verbs path must end in the clear exit-2 message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn ibscope() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ibscope"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sysfs")
        .join(name)
}

fn run(root: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(ibscope());
    cmd.args(args).env_remove("IBSCOPE_SYSFS_ROOT");
    if let Some(root) = root {
        cmd.env("IBSCOPE_SYSFS_ROOT", root);
    }
    cmd.output().expect("run ibscope")
}

fn json(root: &Path, args: &[&str]) -> (i32, Value) {
    let out = run(Some(root), args);
    let value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), value)
}

fn kinds(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect()
}

/// Copy a fixture (symlinks as symlinks: they are relative) to change it.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn one_connectx6_on_infiniband_is_ready() {
    let root = fixture("connectx6-ib");
    let (code, r) = json(&root, &["host", "--check", "--json"]);
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["ready"], true);
    assert_eq!(r["hostname"], "node017");
    assert_eq!(r["verbs"]["status"], "not-used");
    let d = &r["devices"][0];
    assert_eq!(r["devices"].as_array().unwrap().len(), 1);
    assert_eq!(d["name"], "mlx5_0");
    assert_eq!(d["node_guid"], "0x0c42a10300a58f2e");
    assert_eq!(d["fw_ver"], "20.31.1014");
    assert_eq!(d["hca_type"], "MT4123");
    assert_eq!(d["driver"]["module"], "mlx5_core");
    assert_eq!(
        d["driver"]["version"],
        Value::Null,
        "in-tree: no version file"
    );
    assert_eq!(d["pci"]["address"], "0000:c1:00.0");
    assert_eq!(d["pci"]["link"]["gen"], 4);
    assert_eq!(d["pci"]["link"]["width"], 16);
    let p = &d["ports"][0];
    assert_eq!(p["link_layer"], "InfiniBand");
    assert_eq!(p["state"], "Active");
    assert_eq!(p["phys_state"], "LinkUp");
    assert_eq!(p["rate"], "4xHDR");
    assert_eq!(p["gbps"], 200.0);
    assert_eq!(p["lid"], 17);
    assert_eq!(p["sm_lid"], 1);
    // GID 0 only: the empty entries 1-3 are left out; an IB GID carries no IP.
    assert_eq!(p["gids"].as_array().unwrap().len(), 1);
    assert_eq!(p["gids"][0]["type"], "IB");
    assert_eq!(p["gids"][0]["ip"], Value::Null);
    assert_eq!(r["gpus"], Value::Array(vec![]));
    assert_eq!(r["peer_memory"]["status"], "missing");
    assert_eq!(r["norms"]["infiniband"], "4xHDR");

    let out = run(Some(&root), &["host", "--check"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("drivers: mlx5_core in-tree (kernel 6.1.0-18-amd64)"),
        "{text}"
    );
    assert!(text.contains("preflight: ready"), "{text}");
    let row = text.lines().find(|l| l.starts_with("mlx5_0")).unwrap();
    let cells: Vec<&str> = row
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            "mlx5_0",
            "1",
            "IB",
            "Active",
            "LinkUp",
            "4xHDR",
            "17",
            "1",
            "20.31.1014",
            "Gen4 x16",
            "0",
            "-"
        ]
    );
}

#[test]
fn roce_ports_show_their_gids_and_a_port_without_link_is_a_finding() {
    let root = fixture("roce-cx6dx");
    let (code, r) = json(&root, &["host", "--check", "--json"]);
    assert_eq!(code, 1, "{r:#}");
    let p = &r["devices"][0]["ports"][0];
    assert_eq!(p["link_layer"], "Ethernet");
    assert_eq!(p["rate"], "4xEDR");
    assert!(p.get("lid").is_none(), "no LID on Ethernet");
    let gids = p["gids"].as_array().unwrap();
    let summary: Vec<(u64, &str, &str, &str)> = gids
        .iter()
        .map(|g| {
            (
                g["index"].as_u64().unwrap(),
                g["type"].as_str().unwrap(),
                g["ip"].as_str().unwrap(),
                g["netdev"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (0, "RoCE v1", "fe80::e42:a1ff:fe8a:1c2e", "enp65s0f0np0"),
            (1, "RoCE v2", "fe80::e42:a1ff:fe8a:1c2e", "enp65s0f0np0"),
            (2, "RoCE v1", "192.168.10.21", "enp65s0f0np0"),
            (3, "RoCE v2", "192.168.10.21", "enp65s0f0np0"),
            (4, "RoCE v1", "2001:db8:10::21", "enp65s0f0np0"),
            (5, "RoCE v2", "2001:db8:10::21", "enp65s0f0np0"),
        ]
    );
    assert_eq!(gids[2]["gid"], "0000:0000:0000:0000:0000:ffff:c0a8:0a15");
    // The port without a link: no rate (the kernel's "40 Gb/sec (4X QDR)" is a default).
    let down = &r["devices"][1]["ports"][0];
    assert_eq!(down["state"], "Down");
    assert_eq!(down["phys_state"], "Disabled");
    assert_eq!(down["rate"], Value::Null);
    assert_eq!(kinds(&r), ["hca-port-not-active"]);
    let f = &r["findings"][0];
    assert_eq!(f["device"], "mlx5_1");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["at"]["node_guid"], "0x0c42a103008a1c2f");
    assert_eq!(f["at"]["port"], 1);
    assert!(f["message"].as_str().unwrap().contains("no link"));

    let text = String::from_utf8(run(Some(&root), &["host"]).stdout).unwrap();
    assert!(
        text.lines().any(|l| l.contains("192.168.10.21")
            && l.contains("enp65s0f0np0")
            && l.contains("RoCE v1 gid 2, RoCE v2 gid 3")),
        "{text}"
    );
}

#[test]
fn a_pcie_link_trained_down_says_the_bandwidth_lost() {
    let root = fixture("pcie-degraded");
    let (code, r) = json(&root, &["host", "--check", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&r), ["pcie-link-degraded"]);
    let pci = &r["devices"][0]["pci"];
    assert_eq!(pci["link"]["gen"], 4);
    assert_eq!(pci["link"]["width"], 8);
    assert_eq!(pci["device_max"]["gen"], 5);
    assert_eq!(pci["slot_max"]["width"], 16);
    let m = r["findings"][0]["message"].as_str().unwrap();
    // x8 Gen4 of x16 Gen5 is a quarter of the bandwidth, and too little for NDR.
    assert!(m.contains("trained at Gen4 x8 (126 Gb/s)"), "{m}");
    assert!(
        m.contains("support Gen5 x16 (504 Gb/s): 378 Gb/s (75%) lost"),
        "{m}"
    );
    assert!(m.contains("cannot carry its 4xNDR port (400 Gb/s)"), "{m}");
    let text = String::from_utf8(run(Some(&root), &["host"]).stdout).unwrap();
    assert!(text.contains("Gen4 x8 of Gen5 x16"), "{text}");
}

#[test]
fn a_dgx_host_with_one_hca_trained_down() {
    let root = fixture("dgx-h100");
    let (code, r) = json(&root, &["host", "--check", "--json"]);
    assert_eq!(code, 1);
    let devices = r["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 8);
    // The 4 NVSwitches are NVIDIA functions of a bridge class, not GPUs.
    let gpus = r["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 8);
    assert_eq!(gpus[0]["address"], "0000:1b:00.0");
    assert_eq!(gpus[0]["device_id"], "0x2330");
    assert_eq!(r["peer_memory"]["module"], "nvidia_peermem");
    assert_eq!(r["peer_memory"]["version"], "550.54.15");
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d["driver"]["version"], "24.10-1.1.4");
        // Each HCA shares a PCIe switch with exactly its GPU; the others on its NUMA node
        // share a host bridge with nothing (one root complex each) but the NUMA node.
        let near = d["gpus_near"].as_array().unwrap();
        assert_eq!(near[0]["gpu"], i as u64, "{}", d["name"]);
        assert_eq!(near[0]["relation"], "pcie-switch");
        assert_eq!(
            near.len(),
            4,
            "{}: its GPU and 3 on its NUMA node",
            d["name"]
        );
        assert!(near[1..].iter().all(|n| n["relation"] == "numa-node"));
        let numa = if i < 4 { 0 } else { 1 };
        assert!(near.iter().all(|n| n["gpu"].as_u64().unwrap() / 4 == numa));
    }
    assert_eq!(kinds(&r), ["hca-rate-below-norm"]);
    let f = &r["findings"][0];
    assert_eq!(f["device"], "mlx5_5");
    assert_eq!(f["at"]["lid"], 0x6a);
    assert_eq!(r["norms"]["infiniband"], "4xNDR");

    // One screen: the summary, 8 rows, the findings.
    let out = run(Some(&root), &["host", "--check"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 24, "{} lines:\n{text}", lines.len());
    let widest = lines.iter().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 160, "{widest} columns:\n{text}");
    let table: Vec<&&str> = lines.iter().filter(|l| l.starts_with("mlx5_")).collect();
    assert_eq!(table.len(), 8);
    assert!(lines
        .iter()
        .all(|l| !l.starts_with("mlx5_") || l.chars().count() <= 100));
    assert!(table[5].contains("4xHDR") && table[5].contains("GPU5 (switch)"));
    assert!(
        text.contains("NVIDIA GPUs: 8 (device 0x2330); GPUDirect RDMA: nvidia_peermem 550.54.15")
    );
}

#[test]
fn dgx_gaps_each_make_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dgx");
    copy_tree(&fixture("dgx-h100"), &root);
    // nvidia_peermem unloaded, one HCA on other firmware.
    let modules = root.join("proc/modules");
    let text = std::fs::read_to_string(&modules).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.starts_with("nvidia_peermem "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&modules, kept).unwrap();
    let mlx5_2 = std::fs::canonicalize(root.join("sys/class/infiniband/mlx5_2")).unwrap();
    std::fs::write(mlx5_2.join("fw_ver"), "28.37.1014\n").unwrap();
    let (code, r) = json(&root, &["host", "--check", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(
        kinds(&r),
        [
            "hca-rate-below-norm",
            "peer-memory-missing",
            "mixed-firmware"
        ]
    );
    let fw = r["findings"][2]["message"].as_str().unwrap();
    assert!(fw.contains("28.37.1014 (mlx5_2)"), "{fw}");
    assert_eq!(r["peer_memory"]["status"], "missing");

    // --expect holds every InfiniBand port to the given rate.
    let (_, r) = json(&root, &["host", "--check", "--json", "--expect", "4xXDR"]);
    assert_eq!(
        kinds(&r)
            .iter()
            .filter(|k| *k == "hca-rate-below-norm")
            .count(),
        8
    );
}

#[test]
fn one_device_with_ca_and_an_unknown_one() {
    let root = fixture("dgx-h100");
    let (code, r) = json(&root, &["-C", "mlx5_3", "host", "--check", "--json"]);
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["devices"].as_array().unwrap().len(), 1);
    assert_eq!(r["devices"][0]["name"], "mlx5_3");
    let out = run(Some(&root), &["-C", "mlx5_9", "host"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no RDMA device named mlx5_9 (this host has mlx5_0, mlx5_1,"),
        "{err}"
    );
}

/// Into a closed pipe, quietly, with the exit code of the run: `--check` finds what the
/// fixture lacks (exit 1).
#[test]
fn a_closed_pipe_ends_quietly() {
    for (args, code) in [(&["host", "--check"][..], 1), (&["host", "--json"][..], 0)] {
        let mut child = Command::new(ibscope())
            .args(args)
            .env("IBSCOPE_SYSFS_ROOT", fixture("dgx-h100"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn an_empty_root_is_exit_2_with_the_hint() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(Some(dir.path()), &["host", "--check"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no RDMA devices: is the mlx5_ib module loaded?"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// The real host, through libibverbs where the binary has it. This machine has no RDMA
/// device; on one that has, there is nothing to assert here.
#[test]
fn this_machine_without_rdma_devices_is_exit_2_not_a_crash() {
    let has_devices = std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if has_devices {
        eprintln!("skipped: this machine has RDMA devices");
        return;
    }
    for args in [&["host"][..], &["host", "--check", "--json"][..]] {
        let out = run(None, args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("ibscope: error: no RDMA devices: is the mlx5_ib module loaded?"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("sysfs: nothing in /sys/class/infiniband"),
            "{err}"
        );
        if cfg!(feature = "verbs") {
            assert!(
                err.contains("libibverbs:"),
                "the verbs path was not taken: {err}"
            );
        }
    }
}

/// `host --counters` on the ConnectX-6 tree with counters added: values named as the
/// driver names them, data in bytes, "N/A (no PMA)" and garbage as null with a note; with
/// --check --interval a link_downed that rises between the reads is a finding.
#[test]
fn counters_are_shown_and_a_rising_link_downed_is_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("connectx6-ib"), dir.path());
    let port = dir.path().join("sys/class/infiniband/mlx5_0/ports/1");
    let write = |rel: &str, text: &str| {
        let p = port.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("counters/symbol_error", "12\n");
    write("counters/link_downed", "0\n");
    write("counters/port_rcv_data", "250\n");
    write("counters/VL15_dropped", "N/A (no PMA)\n");
    write("counters/port_xmit_discards", "\u{1b}]0;x\u{7}\n");
    write("hw_counters/rnr_nak_retry_err", "0\n");
    let (code, report) = json(dir.path(), &["host", "--counters", "--json"]);
    assert_eq!(code, 0, "{report}");
    let counters = report["counters"][0]["counters"].as_array().unwrap();
    let of = |name: &str| {
        counters
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {report}"))
            .clone()
    };
    assert_eq!(of("symbol_error")["value"], 12);
    assert_eq!(of("symbol_error")["group"], "link-errors");
    assert_eq!(
        of("port_rcv_data")["value"],
        1000,
        "4-byte words shown as bytes"
    );
    assert_eq!(of("port_rcv_data")["unit"], "bytes");
    assert_eq!(of("VL15_dropped")["value"], Value::Null);
    assert_eq!(of("VL15_dropped")["note"], "N/A (no PMA)");
    assert_eq!(of("port_xmit_discards")["value"], Value::Null);
    assert_eq!(of("rnr_nak_retry_err")["group"], "transport");
    let text = String::from_utf8(run(Some(dir.path()), &["host", "--counters"]).stdout).unwrap();
    assert!(
        text.contains("link errors") && text.contains("1000 B"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "garbage is escaped:\n{text}");

    // Between the two reads of --check --interval, the link goes down once.
    let bump = {
        let file = port.join("counters/link_downed");
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::fs::write(file, "1\n").unwrap();
        })
    };
    let (code, report) = json(
        dir.path(),
        &["host", "--check", "--interval", "1", "--json"],
    );
    bump.join().unwrap();
    assert_eq!(code, 1, "{report}");
    let rising: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "host-counter-rate")
        .collect();
    assert_eq!(rising.len(), 1, "{report}");
    let message = rising[0]["message"].as_str().unwrap();
    assert!(
        message.contains("port 1's link_downed rose by 1") && message.contains("any increase"),
        "{message}"
    );
    // A thresholds file that allows 5 a second: the same rise is no finding.
    let limits = dir.path().join("thresholds");
    std::fs::write(&limits, "host.link_downed=5/s\n").unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("thresholds = {:?}\n", limits.to_str().unwrap()),
    )
    .unwrap();
    std::fs::write(port.join("counters/link_downed"), "1\n").unwrap();
    let bump = {
        let file = port.join("counters/link_downed");
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::fs::write(file, "2\n").unwrap();
        })
    };
    let out = Command::new(ibscope())
        .args(["host", "--check", "--interval", "1", "--json"])
        .env("IBSCOPE_SYSFS_ROOT", dir.path())
        .env("IBSCOPE_CONFIG", &config)
        .output()
        .unwrap();
    bump.join().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !kinds(&report).contains(&"host-counter-rate".to_string()),
        "{report}"
    );
    // Without a rise, --check --interval finds nothing more than --check.
    let (code, report) = json(
        dir.path(),
        &["host", "--check", "--interval", "0.2", "--json"],
    );
    assert_eq!(code, 0, "{report}");
    let out = run(Some(dir.path()), &["host", "--counters", "--interval", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The fixtures list each device's uverbs and each InfiniBand port's umad with its node in
/// /dev/infiniband; a node gone (a container started without it) or a module not loaded
/// leaves an Active port no application can use: device-files-missing, exit 1.
#[test]
fn an_active_port_without_its_device_files_is_found() {
    let (code, report) = json(&fixture("connectx6-ib"), &["host", "--json"]);
    assert_eq!(code, 0, "{report}");
    let files = &report["devices"][0]["files"];
    assert_eq!(files["uverbs"]["name"], "uverbs0", "{files}");
    assert_eq!(files["umad"][0]["port"], 1);
    assert_eq!(files["umad"][0]["present"], true);
    let (_, report) = json(&fixture("roce-cx6dx"), &["host", "--check", "--json"]);
    assert!(
        !kinds(&report).contains(&"device-files-missing".to_string()),
        "a RoCE host needs no umad: {report}"
    );

    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("connectx6-ib"), dir.path());
    std::fs::remove_file(dir.path().join("dev/infiniband/umad0")).unwrap();
    let (code, report) = json(dir.path(), &["host", "--check", "--json"]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(kinds(&report), ["device-files-missing"]);
    let message = report["findings"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("/dev/infiniband/umad0 is missing"),
        "{message}"
    );

    std::fs::remove_dir_all(dir.path().join("sys/class/infiniband_verbs")).unwrap();
    let out = run(Some(dir.path()), &["host", "--check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("is ib_uverbs loaded?"), "{text}");
}

/// The DGX fixture's switch ports carry an ACS capability with redirection off; one turned
/// on between GPU 2 and its HCA sends GPUDirect RDMA through the root complex:
/// acs-blocks-p2p on that HCA, naming the GPU and the bridge.
#[test]
fn acs_redirection_between_a_gpu_and_its_hca_is_found() {
    let (_, report) = json(&fixture("dgx-h100"), &["host", "--check", "--json"]);
    let bridges = report["bridges"].as_array().unwrap();
    assert_eq!(
        bridges.len(),
        16,
        "two downstream ports per switch: {bridges:#?}"
    );
    assert!(bridges
        .iter()
        .all(|b| b["acs"] == "present" && b["control"] == 0));
    assert!(!kinds(&report).contains(&"acs-blocks-p2p".to_string()));

    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("dgx-h100"), dir.path());
    let gpu2 = report["gpus"][2]["address"].as_str().unwrap().to_string();
    let port = bridges
        .iter()
        .map(|b| b["address"].as_str().unwrap())
        .find(|a| {
            let dev = dir.path().join("sys/bus/pci/devices").join(&gpu2);
            let real = std::fs::canonicalize(dev).unwrap();
            real.parent().unwrap().file_name().unwrap().to_str() == Some(*a)
        })
        .expect("the bridge above GPU 2")
        .to_string();
    let config = dir
        .path()
        .join("sys/bus/pci/devices")
        .join(&port)
        .join("config");
    let mut bytes = std::fs::read(&config).unwrap();
    bytes[0x14e..0x150].copy_from_slice(&0x001du16.to_le_bytes());
    std::fs::write(&config, bytes).unwrap();
    let (code, report) = json(dir.path(), &["host", "--check", "--json"]);
    assert_eq!(code, 1);
    let acs: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "acs-blocks-p2p")
        .collect();
    assert_eq!(acs.len(), 1, "{report:#}");
    assert_eq!(acs[0]["device"], "mlx5_2");
    let message = acs[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("shares a PCIe switch with GPU 2 ({gpu2})")),
        "{message}"
    );
    assert!(
        message.contains(&format!("{port} (ACS control 0x001d)")),
        "{message}"
    );
}

/// A RoCE port's netdev statistics (ethtool -S, saved under the fixture root) sit beside
/// its RDMA counters: per-priority pauses and discards. Priority 3 pausing its peer for
/// the whole of a 2 s read is a pfc-storm.
#[test]
fn roce_pause_statistics_are_read_and_a_pfc_storm_is_found() {
    let out = run(
        Some(&fixture("roce-cx6dx")),
        &["host", "--counters", "--json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let report =
        crate::common::schema::assert_valid("host-counters", "host --counters", &text, false)
            .remove(0);
    let out = run(
        Some(&fixture("dgx-h100")),
        &["host", "--counters", "--interval", "0.1", "--json"],
    );
    crate::common::schema::assert_valid(
        "host-counters",
        "host --counters --interval",
        &String::from_utf8_lossy(&out.stdout),
        false,
    );
    let port = report["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["device"] == "mlx5_0" && s["port"] == 1)
        .unwrap()
        .clone();
    let ethtool: Vec<(&str, u64)> = port["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "ethtool")
        .map(|c| (c["name"].as_str().unwrap(), c["value"].as_u64().unwrap()))
        .collect();
    assert!(ethtool.contains(&("rx_prio3_pause", 1520)), "{ethtool:?}");
    assert!(ethtool.contains(&("rx_out_of_buffer", 3)), "{ethtool:?}");
    assert!(
        !ethtool.iter().any(|(n, _)| *n == "rx_packets"),
        "only the lossless ones"
    );
    let text =
        String::from_utf8_lossy(&run(Some(&fixture("roce-cx6dx")), &["host", "--counters"]).stdout)
            .into_owned();
    assert!(text.contains("tx_prio3_pause_duration"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("roce-cx6dx"), dir.path());
    let stats = dir.path().join("ethtool/enp65s0f0np0");
    let saved = std::fs::read_to_string(&stats).unwrap();
    let storm = saved.replace(
        "tx_prio3_pause_duration: 20450",
        "tx_prio3_pause_duration: 2020450",
    );
    let bump = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        std::fs::write(stats, storm).unwrap();
    });
    let (code, report) = json(
        dir.path(),
        &["host", "--check", "--interval", "2", "--json"],
    );
    bump.join().unwrap();
    assert_eq!(code, 1, "{report}");
    let storm: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "pfc-storm")
        .collect();
    assert_eq!(storm.len(), 1, "{report:#}");
    assert!(storm[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("port 1's priority 3 paused its link partner"));
}

/// The RoCE fixture's port runs lossless priority 3 for DSCP 26 (PFC, DSCP map, ECN, ToS,
/// MTU 9000): `host --check` with the matching `[roce]` profile is ready; a profile of
/// priority 4 and a netdev MTU too small for it are roce-config, each difference named.
#[test]
fn roce_ports_are_checked_against_the_roce_profile() {
    let dir = tempfile::tempdir().unwrap();
    let check = |profile: &str| {
        let config = dir.path().join("config.toml");
        std::fs::write(&config, profile).unwrap();
        let out = Command::new(ibscope())
            .args(["host", "--check", "--json", "-C", "mlx5_0"])
            .env("IBSCOPE_SYSFS_ROOT", fixture("roce-cx6dx"))
            .env("IBSCOPE_CONFIG", &config)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().unwrap(), report)
    };
    let (code, report) = check("[roce]\npriority = 3\ndscp = 26\necn = true\nmtu = 4096\n");
    assert_eq!(code, 0, "{report:#}");
    let (code, report) = check("[roce]\npriority = 4\ndscp = 26\npfc = [4]\necn = true\n");
    assert_eq!(code, 1);
    assert_eq!(kinds(&report), ["roce-config"]);
    let message = report["findings"][0]["message"].as_str().unwrap();
    for part in [
        "enp65s0f0np0: PFC is on for priorities 3, the profile wants 4",
        "DSCP 26 maps to priority 3, not 4",
        "ECN notification (roce_np) is off on priority 4",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let out = Command::new(ibscope())
        .args(["host", "--check"])
        .env("IBSCOPE_SYSFS_ROOT", fixture("roce-cx6dx"))
        .env("IBSCOPE_CONFIG", {
            let bad = dir.path().join("bad.toml");
            std::fs::write(&bad, "[roce]\npriority = 9\n").unwrap();
            bad
        })
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[roce]: priority 9 is not 0-7"));
}

/// The RoCE fixture keeps iproute2's own `dcb` output (DSCPs by name, `dscp-prio AF31:3
/// CS6:6`): it reads as DSCP 26 and 48. Without that file the settings are unknown, and
/// say why: in the text, in the JSON (`unread`), and as a roce-config finding where the
/// `[roce]` profile asks for them.
#[test]
fn dcb_output_with_dscp_names_reads_and_an_unread_setting_says_why() {
    let root = fixture("roce-cx6dx");
    let saved = std::fs::read_to_string(root.join("dcb/enp65s0f0np0")).unwrap();
    assert!(saved.contains("dscp-prio AF31:3 CS6:6"), "{saved}");
    let (_, report) = json(&root, &["host", "--json", "-C", "mlx5_0"]);
    let roce = &report["devices"][0]["roce"][0];
    assert_eq!(
        roce["dscp_to_priority"],
        serde_json::json!({"26": 3, "48": 6})
    );
    assert_eq!(roce["pfc"], serde_json::json!([3]));
    assert!(roce.get("unread").is_none(), "{roce}");

    let dir = tempfile::tempdir().unwrap();
    copy_tree(&root, dir.path());
    std::fs::remove_file(dir.path().join("dcb/enp65s0f0np0")).unwrap();
    let text = String::from_utf8(run(Some(dir.path()), &["host", "-C", "mlx5_0"]).stdout).unwrap();
    let lossless = text.lines().find(|l| l.contains("lossless:")).unwrap();
    assert!(
        lossless.contains("MTU 9000, PFC and DSCP unknown (no saved DCB settings in ")
            && lossless.contains("dcb/enp65s0f0np0), ECN np 3 rp 3"),
        "{lossless}"
    );
    assert!(!lossless.contains('?'), "{lossless}");
    let (_, report) = json(dir.path(), &["host", "--json", "-C", "mlx5_0"]);
    let unread = &report["devices"][0]["roce"][0]["unread"];
    assert!(unread["pfc"]
        .as_str()
        .unwrap()
        .starts_with("no saved DCB settings in "));
    assert_eq!(unread["pfc"], unread["dscp_to_priority"]);

    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[roce]\npriority = 3\ndscp = 26\n").unwrap();
    let out = Command::new(ibscope())
        .args(["host", "--check", "--json", "-C", "mlx5_0"])
        .env("IBSCOPE_SYSFS_ROOT", dir.path())
        .env("IBSCOPE_CONFIG", &config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(kinds(&report), ["roce-config"]);
    let message = report["findings"][0]["message"].as_str().unwrap();
    for part in [
        "enp65s0f0np0: PFC could not be read (no saved DCB settings in ",
        "the profile wants it on priorities 3",
        "the DSCP map could not be read (no saved DCB settings in ",
        "the profile wants DSCP 26 on priority 3",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
}

/// The checklist's versions: rdma-core from its libibverbs' file name, the NVIDIA driver
/// from its module (else /proc/driver/nvidia/version); no CUDA answer under a fixture root.
#[test]
fn the_stack_versions_are_read() {
    let (_, report) = json(&fixture("dgx-h100"), &["host", "--json"]);
    assert_eq!(report["versions"]["rdma_core"], "50.0", "{report:#}");
    assert_eq!(report["versions"]["nvidia_driver"], "550.54.15");
    assert!(report["versions"]["cuda_driver"].is_null());
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("dgx-h100"), dir.path());
    std::fs::remove_file(dir.path().join("sys/module/nvidia/version")).unwrap();
    let (_, report) = json(dir.path(), &["host", "--json"]);
    assert_eq!(
        report["versions"]["nvidia_driver"], "550.54.15",
        "from procfs"
    );
    let (_, report) = json(&fixture("connectx6-ib"), &["host", "--json"]);
    assert!(
        report["versions"]["rdma_core"].is_null() && report["versions"]["nvidia_driver"].is_null()
    );
}

/// `host --prometheus`: valid exposition (promtool) of the host's versions, ports, every
/// counter read (a RoCE netdev's per-priority pauses with a priority label) and the
/// check's findings by kind; exit 0 without --check, 1 with it when there are findings.
#[test]
fn the_host_as_prometheus_text() {
    let out = run(Some(&fixture("roce-cx6dx")), &["host", "--prometheus"]);
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8_lossy(&out.stdout).into_owned();
    let checked = crate::common::promtool_check(&page);
    assert!(checked.passed(), "promtool: {}\n{page}", checked.report);
    for line in [
        "ibscope_host_info{hostname=\"web-roce-03\",kernel=\"6.8.0-45-generic\",rdma_core=\"\",nvidia_driver=\"\",cuda_driver=\"\"} 1",
        "ibscope_host_port_active{device=\"mlx5_1\",port=\"1\",link_layer=\"Eth\"} 0",
        "ibscope_host_statistic_total{device=\"mlx5_0\",port=\"1\",netdev=\"enp65s0f0np0\",priority=\"3\",group=\"congestion\",source=\"ethtool\",name=\"tx_prio3_pause\"} 311",
        "ibscope_host_findings{kind=\"hca-port-not-active\",severity=\"error\"} 1",
        "ibscope_host_ready 0",
    ] {
        assert!(page.lines().any(|l| l == line), "{line}\n{page}");
    }
    let out = run(
        Some(&fixture("roce-cx6dx")),
        &["host", "--prometheus", "--check"],
    );
    assert_eq!(out.status.code(), Some(1));
    // The compute-node alert rules pass their promtool tests and read families this page
    // has, with labels it writes.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus");
    let test = Command::new("promtool")
        .args(["test", "rules", "ibscope-host-alerts.test.yml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stdout)
    );
    let rules = std::fs::read_to_string(dir.join("ibscope-host-alerts.yml")).unwrap();
    for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("ibscope_host_") {
            assert!(
                page.contains(&format!("\n{word}")),
                "{word} is not on the page"
            );
        }
    }
    // The compute-node dashboard's queries parse (promtool, as recording rules) and read
    // families and labels of this page.
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/grafana/ibscope-host.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut records = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, p) in dash["panels"].as_array().unwrap().iter().enumerate() {
        let expr = p["targets"][0]["expr"]
            .as_str()
            .unwrap()
            .replace("$instance", ".*");
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("ibscope_host_") {
                assert!(
                    page.contains(&format!("\n{word}")),
                    "panel {i}: {word} is not on the page"
                );
            }
        }
        for label in ["group", "name", "netdev", "priority", "kind", "severity"] {
            if expr.contains(&format!("{label}=")) || expr.contains(&format!("{{{label}}}")) {
                assert!(
                    page.contains(&format!("{label}=\"")),
                    "panel {i}: no label {label}"
                );
            }
        }
        records.push_str(&format!(
            "      - record: ibscope:panel{i}\n        expr: {}\n",
            serde_json::to_string(&expr).unwrap()
        ));
    }
    let rules = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(rules.path(), records).unwrap();
    let check = Command::new("promtool")
        .args(["check", "rules"])
        .arg(rules.path())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    for label in ["device", "port", "netdev", "priority", "name"] {
        assert!(page.contains(&format!(",{label}=\"")) || page.contains(&format!("{{{label}=\"")));
    }
}

/// node_exporter's InfiniBand fixture (tests/data/sysfs/node-exporter-ib, SOURCES.md
/// there): an iWARP device whose PMA answers nothing and a two-port ConnectX-3 with a
/// saturated 32-bit port_xmit_wait, no GUIDs, GIDs or PCI links. Every field it lacks is
/// unknown, every N/A stays N/A (never 0), words become bytes.
#[test]
fn node_exporters_fixture_reads_without_inventing_values() {
    let root = fixture("node-exporter-ib");
    let (code, report) = json(&root, &["host", "--json"]);
    assert_eq!(code, 0, "{report:#}");
    let devices = report["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[1]["name"], "mlx4_0");
    assert_eq!(devices[1]["fw_ver"], "2.31.5050");
    assert!(devices[1]["node_guid"].is_null() && devices[1]["pci"].is_null());
    assert_eq!(devices[1]["ports"][1]["rate"], "4xQDR");
    assert_eq!(
        devices[0]["ports"][0]["rate"], "4xSDR",
        "10 Gb/sec (4X) is SDR"
    );

    let (code, report) = json(&root, &["host", "--counters", "--json"]);
    assert_eq!(code, 0);
    let value = |device: &str, port: u64, name: &str| {
        report["counters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["device"] == device && s["port"] == port)
            .and_then(|s| {
                s["counters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["name"] == name)
                    .cloned()
            })
            .unwrap_or_else(|| panic!("{device}/{port} {name}"))
    };
    let na = value("i40iw0", 1, "symbol_error");
    assert!(na["value"].is_null(), "{na}");
    assert_eq!(na["note"], "N/A (no PMA)");
    assert_eq!(value("mlx4_0", 1, "port_xmit_data")["value"], 3_733_440 * 4);
    assert_eq!(value("mlx4_0", 1, "port_xmit_data")["unit"], "bytes");
    assert_eq!(
        value("mlx4_0", 1, "port_xmit_wait")["value"],
        4_294_967_295u64
    );
    assert_eq!(
        value("mlx4_0", 1, "port_rcv_packets")["value"],
        6_825_908_347u64
    );
    let text =
        String::from_utf8_lossy(&run(Some(&root), &["host", "--counters"]).stdout).into_owned();
    assert!(
        text.contains("N/A (no PMA)\n"),
        "no unit after N/A:\n{text}"
    );
    assert!(!text.contains("N/A (no PMA) B"), "{text}");
}
