//! `ibscope cables` on a host fixture root: a netdev whose saved module memory is a
//! published capture (tests/data/cables), once as published and once with its receiver
//! dark, as the one failing module an operator must find by its serial.

use std::path::PathBuf;

use crate::common::*;

use ibscope_mad::cable::{dump, HalfAddr, ADDR_A0, ADDR_A2};

pub(crate) const SFP: &str = "tests/data/cables/sonic-sfputil-sff8472-finisar-ftlx8571d3bcl.txt";

/// The capture in ethtool's raw layout (A0h, then A2h), with A2h bytes 104-105 (the
/// received power) set to `rx`.
pub(crate) fn raw_sfp(rx: [u8; 2]) -> Vec<u8> {
    let memory = dump::parse(&std::fs::read(repo_root().join(SFP)).unwrap())
        .unwrap()
        .memory;
    let mut out = Vec::new();
    for at in [
        HalfAddr::lower(ADDR_A0),
        HalfAddr::page(ADDR_A0, 0),
        HalfAddr::lower(ADDR_A2),
        HalfAddr::page(ADDR_A2, 0),
    ] {
        out.extend_from_slice(memory.half(at).unwrap());
    }
    out[256 + 104..256 + 106].copy_from_slice(&rx);
    out
}

#[test]
fn the_host_inventory_and_its_one_dark_module() {
    let root = temp_dir();
    for netdev in ["eth2", "eth3", "eth4"] {
        std::fs::create_dir_all(
            root.path()
                .join("sys/class/net")
                .join(netdev)
                .join("device"),
        )
        .unwrap();
    }
    // A bridge (no device) and an IPoIB netdev (type 32) have no module to read.
    std::fs::create_dir_all(root.path().join("sys/class/net/br0")).unwrap();
    std::fs::create_dir_all(root.path().join("sys/class/net/ib0/device")).unwrap();
    std::fs::write(root.path().join("sys/class/net/ib0/type"), "32\n").unwrap();
    std::fs::create_dir_all(root.path().join("module")).unwrap();
    // eth2: the module as published; eth3: the same module with no light received;
    // eth4: no module memory at all.
    std::fs::copy(repo_root().join(SFP), root.path().join("module/eth2")).unwrap();
    std::fs::write(root.path().join("module/eth3"), raw_sfp([0, 0])).unwrap();
    let env = [("IBSCOPE_SYSFS_ROOT", root.path().to_str().unwrap())];

    let out = ibscope_plain(&["cables", "--json"], &env);
    let text = assert_exit(&out, 1);
    let doc =
        crate::common::schema::assert_valid("cables", "cables --json", &text, false).remove(0);
    let modules = doc["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 3);
    assert_eq!(modules[0]["module"]["identity"]["serial"], "AUJ0RCJ");
    assert_eq!(modules[0]["findings"].as_array().unwrap().len(), 0);
    let dark = &modules[1]["findings"].as_array().unwrap()[0];
    assert_eq!(dark["kind"], "cable-rx-power-low");
    assert!(dark["message"].as_str().unwrap().contains("SN AUJ0RCJ"));
    assert!(modules[2]["error"]
        .as_str()
        .unwrap()
        .contains("no saved module memory"));

    let out = ibscope_plain(&["cables"], &env);
    let text = assert_exit(&out, 1);
    assert!(text.contains("[cable-rx-power-low]"), "{text}");
    assert!(text.contains("dark"), "{text}");

    // Read twice: the saved module did not change, so every rate is 0.
    let out = ibscope_plain(
        &["cables", "--netdev", "eth2", "--interval", "0.2", "--json"],
        &env,
    );
    let text = assert_exit(&out, 0);
    let doc =
        crate::common::schema::assert_valid("cables", "cables --json", &text, false).remove(0);
    let rates = &doc["modules"][0]["rates"];
    assert_eq!(rates["seconds"], 0.2);
    assert_eq!(rates["temperature_c_per_min"], 0.0);
    assert_eq!(rates["lanes"][0]["rx_power_db_per_min"], 0.0);
    let out = ibscope_plain(&["cables", "--netdev", "eth2", "--interval", "0"], &env);
    assert_eq!(out.status.code(), Some(2));

    let out = ibscope_plain(&["cables", "--csv", "--netdev", "eth2"], &env);
    let text = assert_exit(&out, 0);
    let row = text.lines().nth(1).unwrap();
    assert!(row.starts_with("netdev,eth2,SFF-8472,"), "{row}");
    assert!(
        row.contains(",FINISAR CORP.,00:90:65,FTLX8571D3BCL,A,AUJ0RCJ,151029,"),
        "{row}"
    );
}

/// A config file naming the fabric `recorded`: examples/fabrics/net served by `ibscope sim
/// responder` with `modules` (NODE[PORT], dump file) in their ports.
pub(crate) fn recorded_fabric(
    dir: &std::path::Path,
    modules: &[(&str, &std::path::Path)],
) -> PathBuf {
    let mut command = format!(
        "exec '{}' sim responder '{}'",
        ibscope_bin().display(),
        fabric("net").display()
    );
    for (at, file) in modules {
        command.push_str(&format!(" --module '{at}={}'", file.display()));
    }
    let text = format!(
        "[[fabric]]\nname = \"recorded\"\ncommand = \"{}\"\n",
        command.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The whole InfiniBand path of `ibscope cables`, its command line to its output, against
/// recorded module memory: a dark module found at its switch port by its serial.
#[test]
fn the_fabric_inventory_through_the_registers_and_its_one_dark_module() {
    let dir = temp_dir();
    let dark = dir.path().join("dark-sfp.bin");
    std::fs::write(&dark, raw_sfp([0, 0])).unwrap();
    let sfp = repo_root().join(SFP);
    let dac = repo_root().join("tests/data/cables/sonic-sfputil-sff8636-molex-1110401054.txt");
    let config = recorded_fabric(
        dir.path(),
        &[
            ("Switch1[1]", &dark),
            ("Hca1[1]", &sfp),
            ("Switch1[3]", &dac),
        ],
    );
    let empty_root = dir.path().join("root");
    std::fs::create_dir_all(&empty_root).unwrap();
    let env = [
        ("IBSCOPE_CONFIG", config.to_str().unwrap()),
        ("IBSCOPE_SYSFS_ROOT", empty_root.to_str().unwrap()),
    ];

    let out = ibscope_plain(
        &["-C", "recorded", "cables", "--access-register", "--json"],
        &env,
    );
    let text = assert_exit(&out, 1);
    let doc =
        crate::common::schema::assert_valid("cables", "cables --json", &text, false).remove(0);
    let modules = doc["modules"].as_array().unwrap();
    let at = |node: &str, port: u64| {
        modules
            .iter()
            .find(|m| m["port"]["node"] == node && m["port"]["port"] == port)
            .unwrap_or_else(|| panic!("{node}[{port}] in {text}"))
    };
    let kinds = |m: &serde_json::Value| -> Vec<String> {
        m["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_string())
            .collect()
    };
    // Three modules, every other cage empty: the net fabric has 18 ports.
    assert_eq!(modules.len(), 3, "{text}");
    let summary = &doc["fabrics"][0];
    assert_eq!(
        (
            &summary["ports"],
            &summary["read"],
            &summary["empty"],
            &summary["not_read"]
        ),
        (&18.into(), &3.into(), &15.into(), &0.into())
    );
    // The dark one, by its serial, at the switch port, with the HCA at the far end. The
    // 10GBASE-SR SFP and the QDR DAC are too slow for the fabric's HDR links as well.
    let dark = at("Switch1", 1);
    assert_eq!(dark["source"], "fabric");
    assert_eq!(dark["module"]["identity"]["serial"], "AUJ0RCJ");
    assert_eq!(dark["remote"]["node"], "Hca1");
    assert_eq!(dark["lanes"], serde_json::json!([1, 2, 3, 4]));
    assert_eq!(kinds(dark), ["cable-rx-power-low", "cable-rate-mismatch"]);
    assert_eq!(kinds(at("Hca1", 1)), ["cable-rate-mismatch"]);
    let molex = at("Switch1", 3);
    assert_eq!(molex["module"]["identity"]["serial"], "611030929");
    assert_eq!(kinds(molex), ["cable-rate-mismatch"]);

    let out = ibscope_plain(&["-C", "recorded", "cables", "--access-register"], &env);
    let text = assert_exit(&out, 1);
    let line = text
        .lines()
        .find(|l| l.starts_with("\"Switch1\"[1]"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("AUJ0RCJ") && line.contains("dark"), "{line}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("[cable-rx-power-low] \"Switch1\"")
                && l.contains("SN AUJ0RCJ: lane 1 receive power")),
        "{text}"
    );
    assert!(
        text.contains("recorded: 18 port(s): 3 module(s) read, 15 empty, 0 not read"),
        "{text}"
    );

    let out = ibscope_plain(
        &["-C", "recorded", "cables", "--access-register", "--csv"],
        &env,
    );
    let text = assert_exit(&out, 1);
    assert!(
        text.lines()
            .any(|l| l.starts_with("fabric,Switch1[1],SFF-8472,") && l.contains(",AUJ0RCJ,")),
        "{text}"
    );

    // Without the flag nothing is sent: every port says it was not read and why.
    let out = ibscope_plain(&["-C", "recorded", "cables", "--json"], &env);
    let text = assert_exit(&out, 2);
    let doc =
        crate::common::schema::assert_valid("cables", "cables --json", &text, false).remove(0);
    assert_eq!(doc["fabrics"][0]["mads"], 0);
    let modules = doc["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 18);
    assert!(modules
        .iter()
        .all(|m| m["error"].as_str().unwrap().contains("--access-register")));
    let out = ibscope_plain(&["-C", "recorded", "cables"], &env);
    let text = assert_exit(&out, 2);
    assert!(
        text.contains("\"Switch1\" (0x")
            && text.contains(
                "ports 1-8: not read: reading a module over InfiniBand sends \
                              SubnSet(AccessRegister)"
            ),
        "{text}"
    );
}

/// The simulator has none of the vendor's registers: each node is asked once (and
/// retried), and every port says it was not read and why.
#[test]
fn on_the_simulator_no_port_answers_module_reads() {
    let sim = sim("net");
    let dir = temp_dir();
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(["cables", "--access-register", "--json"])
        .env("IBSCOPE_SYSFS_ROOT", dir.path());
    let out = run_with_timeout(cmd, client_timeout());
    let text = assert_exit(&out, 2);
    let doc =
        crate::common::schema::assert_valid("cables", "cables --json", &text, false).remove(0);
    let summary = &doc["fabrics"][0];
    assert_eq!(summary["read"], 0);
    assert_eq!(summary["not_read"], summary["ports"]);
    // One read per node, each sent 1 + --retries (3) times.
    assert_eq!(summary["mads"], 4 * 4);
    for m in doc["modules"].as_array().unwrap() {
        let why = m["error"].as_str().unwrap();
        assert!(
            why.starts_with("no reply to SubnSet(AccessRegister)"),
            "{why}"
        );
    }
}

/// `check --cables` reads the modules too and lists their findings at their ports with the
/// fabric's others; without --access-register it is refused, as it would send SubnSets.
#[test]
fn check_judges_the_modules_where_it_may_read_them() {
    let dir = temp_dir();
    let dark = dir.path().join("dark-sfp.bin");
    std::fs::write(&dark, raw_sfp([0, 0])).unwrap();
    let config = recorded_fabric(dir.path(), &[("Switch1[1]", &dark)]);
    let env = [("IBSCOPE_CONFIG", config.to_str().unwrap())];

    let out = ibscope_plain(
        &[
            "-C",
            "recorded",
            "check",
            "--cables",
            "--access-register",
            "--json",
        ],
        &env,
    );
    let text = assert_exit(&out, 1);
    let doc = crate::common::schema::assert_valid("check", "check --json", &text, false).remove(0);
    assert_eq!(doc["cables"]["read"], 1);
    assert_eq!(doc["cables"]["empty"], 17);
    let rx: Vec<&serde_json::Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "cable-rx-power-low")
        .collect();
    assert_eq!(rx.len(), 1, "{text}");
    assert_eq!(rx[0]["at"]["node"], "Switch1");
    assert_eq!(rx[0]["at"]["port"], 1);
    assert!(rx[0]["message"].as_str().unwrap().contains("SN AUJ0RCJ"));

    let out = ibscope_plain(&["-C", "recorded", "check", "--cables"], &env);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--access-register"), "{err}");
}

/// The recorded fabric of the exporter tests: a dark SFP at Switch1[1] (cabled to Hca1),
/// the published SFP at Hca1[1] and the Molex DAC at Switch1[3]; the config naming it.
pub(crate) fn recorded_modules(dir: &std::path::Path) -> PathBuf {
    let dark = dir.join("dark-sfp.bin");
    std::fs::write(&dark, raw_sfp([0, 0])).unwrap();
    let sfp = repo_root().join(SFP);
    let dac = repo_root().join("tests/data/cables/sonic-sfputil-sff8636-molex-1110401054.txt");
    recorded_fabric(
        dir,
        &[
            ("Switch1[1]", &dark),
            ("Hca1[1]", &sfp),
            ("Switch1[3]", &dac),
        ],
    )
}

/// `ibscope -C recorded serve --cables --access-register` on `port`, its stderr in `log`.
pub(crate) fn start_serve_cables(
    config: &std::path::Path,
    log: &std::path::Path,
    port: u16,
) -> crate::common::net::KillOnDrop {
    let mut cmd = std::process::Command::new(ibscope_bin());
    cmd.args(["-C", "recorded", "serve", "--interval", "1"])
        .args(["--cables", "--access-register"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env_remove("LD_PRELOAD")
        .env_remove("IBSIM_SOCKNAME")
        .env("IBSCOPE_CONFIG", config)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    crate::common::net::KillOnDrop::spawn(cmd, "ibscope serve")
}

/// `serve --cables` on the recorded fabric carries exactly the ibscope_cable_* series of
/// tests/data/serve/series_cables.txt: identity, temperature and voltage but not of the
/// passive DAC, light and bias of the optical modules' lanes only, flags, thresholds, the
/// findings per port, the read states; the cable kinds count in ibscope_findings.
#[test]
fn serve_exports_the_modules_it_reads() {
    let dir = temp_dir();
    let config = recorded_modules(dir.path());
    let log = dir.path().join("serve.log");
    let port = crate::common::net::free_port();
    let mut serve = start_serve_cables(&config, &log, port);
    crate::common::net::wait_healthy(&mut serve, port, &log);
    let (code, page) = crate::common::net::get(port, "/metrics");
    assert_eq!(code, 200, "{page}");
    let checked = promtool_check(&page);
    assert!(checked.passed(), "promtool: {}", checked.report);
    let series: Vec<String> = page
        .lines()
        .filter(|l| l.starts_with("ibscope_cable_"))
        .map(|l| l.rsplit_once(' ').map_or(l, |(s, _)| s).to_string())
        .collect();
    let expected: Vec<String> =
        std::fs::read_to_string(repo_root().join("tests/data/serve/series_cables.txt"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect();
    let mut sorted = series.clone();
    sorted.sort();
    let missing: Vec<&String> = expected.iter().filter(|s| !sorted.contains(s)).collect();
    let extra: Vec<&String> = sorted.iter().filter(|s| !expected.contains(s)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing: {missing:#?}\nextra: {extra:#?}"
    );
    // The dark lane, its module's own threshold beside it, and the finding by kind.
    let value = |prefix: &str| -> f64 {
        page.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit_once(' '))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or_else(|| panic!("{prefix} in {page}"))
    };
    let dark = "node_name=\"Switch1\",kind=\"switch\",port=\"1\"";
    assert_eq!(value(&format!("ibscope_cable_rx_power_watts{{fabric=\"recorded\",node_guid=\"0x0000000000200000\",{dark}")), 0.0);
    assert_eq!(
        value("ibscope_findings{fabric=\"recorded\",kind=\"cable-rx-power-low\""),
        1.0
    );
    assert!(page.contains(&format!("{dark},remote_guid=\"0x0000000000100000\",remote_name=\"Hca1\",remote_port=\"1\",finding=\"cable-rx-power-low\"")), "{page}");
}

/// `check --plan` with planned part numbers and lengths: with --cables each end's module
/// is compared (the Molex DAC as planned, the FINISAR SFP not the part planned), without
/// it the plan's part numbers are said not to have been compared.
#[test]
fn the_plan_names_the_cable_that_is_not_the_planned_part() {
    let dir = temp_dir();
    let config = recorded_modules(dir.path());
    let plan = dir.path().join("plan.csv");
    std::fs::write(
        &plan,
        "a_node,a_port,z_node,z_port,part_number,length_m\n\
         Switch1,3,Switch2,3,1110401054,1\n\
         Switch1,4,Switch2,4,,\n\
         Hca1,1,Switch1,1,MFS1S00-H003E,3\n\
         Hca2,2,Switch1,2,,\n",
    )
    .unwrap();
    let env = [("IBSCOPE_CONFIG", config.to_str().unwrap())];
    let plan_arg = plan.to_str().unwrap();

    let out = ibscope_plain(
        &[
            "-C",
            "recorded",
            "check",
            "--plan",
            plan_arg,
            "--cables",
            "--access-register",
            "--json",
        ],
        &env,
    );
    let text = assert_exit(&out, 1);
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let differences = doc["differences"].as_array().unwrap();
    // Both ends of the planned Hca1 cable hold FINISAR SFPs (the published one at Hca1[1],
    // the dark copy at Switch1[1]): neither is the planned part. The DAC is as planned.
    assert_eq!(differences.len(), 2, "{text}");
    for d in differences {
        assert_eq!(d["kind"], "wrong-cable");
        let message = d["message"].as_str().unwrap();
        assert!(
            message.contains("FINISAR CORP. SN AUJ0RCJ")
                && message.contains("part number \"FTLX8571D3BCL\", planned \"MFS1S00-H003E\""),
            "{message}"
        );
    }
    assert_eq!(doc["modules_unchecked"], 0);

    let out = ibscope_plain(&["-C", "recorded", "check", "--plan", plan_arg], &env);
    let text = assert_exit(&out, 0);
    assert!(
        text.contains("note: 2 planned cable(s) name a part number or length not compared"),
        "{text}"
    );
}

/// A driver's failed read returned as data (tests/data/cables/SOURCES.md) is refused, one
/// line and exit 2, never shown as a module.
#[test]
fn a_garbage_read_is_refused_not_shown() {
    let file = repo_root().join("tests/data/cables/mlx5-failed-module-read-returned-as-data.txt");
    let out = ibscope_plain(&["cables", "decode", file.to_str().unwrap()], &[]);
    assert_eq!(assert_exit(&out, 2), "", "nothing on stdout");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("identifier 0x00 (Unknown or unspecified) has no memory map"),
        "{err}"
    );
}

/// On a fabric of many nodes that all give one reason, the reason is said once with its
/// counts, not a line per node; the nodes are every node ibnetdiscover finds.
#[test]
fn one_reason_of_every_node_is_said_once() {
    let sim = sim("fat-tree-2l-64.topo");
    let nodes = assert_success(&reference(&sim, "ibnetdiscover", &[]))
        .lines()
        .filter(|l| l.starts_with("Switch\t") || l.starts_with("Ca\t"))
        .count();
    let dir = temp_dir();
    let run = |args: &[&str]| {
        let mut cmd = sim.command(ibscope_bin());
        cmd.args(args).env("IBSCOPE_SYSFS_ROOT", dir.path());
        run_with_timeout(cmd, client_timeout())
    };
    let doc: serde_json::Value =
        serde_json::from_str(&assert_exit(&run(&["cables", "--json"]), 2)).unwrap();
    let ports = doc["fabrics"][0]["ports"].as_u64().unwrap();
    let text = assert_exit(&run(&["cables"]), 2);
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("--access-register allows it"))
        .collect();
    assert_eq!(said.len(), 1, "{text}");
    assert!(
        said[0].starts_with(&format!("{ports} port(s) on {nodes} nodes: not read: ")),
        "{text}"
    );
}
