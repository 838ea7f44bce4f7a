//! `ibscope query --json` against `smpquery`: for every node and port of the example fabrics
//! (a sample on the fat tree), by LID and by directed route, every NodeInfo, NodeDescription,
//! PortInfo and SwitchInfo field smpquery prints must have the same value in ibscope's JSON.
//!
//! smpquery prints decoded text ("4X", "1X or 4X", "Active", "VL0-7"); the table below turns
//! each text back into the raw field value (libibmad's dump conventions). ibscope's JSON
//! gives coded fields by name with their codes under "raw" and GUIDs as hex text: the
//! codes are compared number against number, and each name with smpquery's text. A field smpquery prints
//! that the table does not know fails the test: nothing is skipped silently.
//!
//! One client at a time per simulator (the shim routes replies to the last registered
//! process), so each fabric is walked sequentially; fabrics run in parallel.

use crate::common;

use common::*;
use serde_json::Value;

/// How smpquery renders a field.
#[derive(Debug, Clone, Copy)]
enum Render {
    /// Decimal, or 0x-hex.
    Number,
    /// "Switch", "Channel Adapter", "Router".
    NodeType,
    /// "1X or 4X or ..." (bit set), also for LinkWidthActive (one bit).
    Widths,
    /// "2.5 Gbps or 5.0 Gbps ..." (bit set), also for LinkSpeedActive.
    Speeds,
    /// "14.0625 Gbps or ..." / "No Extended Speed" / "0".
    ExtSpeeds,
    PortState,
    PhysState,
    /// LinkDownDefState: NoChange / Sleep / Polling.
    LinkDownDefault,
    /// "256" .. "4096".
    Mtu,
    /// "VL0", "VL0-1", "VL0-3", "VL0-7", "VL0-14".
    Vls,
}

use Render::*;

const NODE_INFO: &[(&str, &str, Render)] = &[
    ("BaseVers", "base_version", Number),
    ("ClassVers", "class_version", Number),
    ("NodeType", "node_type", NodeType),
    ("NumPorts", "num_ports", Number),
    ("SystemGuid", "system_image_guid", Number),
    ("Guid", "node_guid", Number),
    ("PortGuid", "port_guid", Number),
    ("PartCap", "partition_cap", Number),
    ("DevId", "device_id", Number),
    ("Revision", "revision", Number),
    ("LocalPort", "local_port_num", Number),
    ("VendorId", "vendor_id", Number),
];

const PORT_INFO: &[(&str, &str, Render)] = &[
    ("GidPrefix", "gid_prefix", Number),
    ("Lid", "lid", Number),
    ("SMLid", "master_sm_lid", Number),
    ("CapMask", "capability_mask", Number),
    ("DiagCode", "diag_code", Number),
    ("MkeyLeasePeriod", "m_key_lease_period", Number),
    ("LocalPort", "local_port_num", Number),
    ("LinkWidthEnabled", "link_width_enabled", Widths),
    ("LinkWidthSupported", "link_width_supported", Widths),
    ("LinkWidthActive", "link_width_active", Widths),
    ("LinkSpeedSupported", "link_speed_supported", Speeds),
    ("LinkState", "port_state", PortState),
    ("PhysLinkState", "port_phys_state", PhysState),
    (
        "LinkDownDefState",
        "link_down_default_state",
        LinkDownDefault,
    ),
    ("ProtectBits", "m_key_protect_bits", Number),
    ("LMC", "lmc", Number),
    ("LinkSpeedActive", "link_speed_active", Speeds),
    ("LinkSpeedEnabled", "link_speed_enabled", Speeds),
    ("NeighborMTU", "neighbor_mtu", Mtu),
    ("SMSL", "master_sm_sl", Number),
    ("VLCap", "vl_cap", Vls),
    ("InitType", "init_type", Number),
    ("VLHighLimit", "vl_high_limit", Number),
    ("VLArbHighCap", "vl_arbitration_high_cap", Number),
    ("VLArbLowCap", "vl_arbitration_low_cap", Number),
    ("InitReply", "init_type_reply", Number),
    ("MtuCap", "mtu_cap", Mtu),
    ("VLStallCount", "vl_stall_count", Number),
    ("HoqLife", "hoq_life", Number),
    ("OperVLs", "operational_vls", Vls),
    ("PartEnforceInb", "partition_enforcement_inbound", Number),
    ("PartEnforceOutb", "partition_enforcement_outbound", Number),
    ("FilterRawInb", "filter_raw_inbound", Number),
    ("FilterRawOutb", "filter_raw_outbound", Number),
    ("MkeyViolations", "m_key_violations", Number),
    ("PkeyViolations", "p_key_violations", Number),
    ("QkeyViolations", "q_key_violations", Number),
    ("GuidCap", "guid_cap", Number),
    ("ClientReregister", "client_reregister", Number),
    (
        "McastPkeyTrapSuppressionEnabled",
        "multicast_pkey_trap_suppression_enabled",
        Number,
    ),
    ("SubnetTimeout", "subnet_timeout", Number),
    ("RespTimeVal", "resp_time_value", Number),
    ("LocalPhysErr", "local_phy_errors", Number),
    ("OverrunErr", "overrun_errors", Number),
    ("MaxCreditHint", "max_credit_hint", Number),
    ("RoundTrip", "link_round_trip_latency", Number),
    ("CapabilityMask2", "capability_mask2", Number),
    ("LinkSpeedExtActive", "link_speed_ext_active", ExtSpeeds),
    (
        "LinkSpeedExtSupported",
        "link_speed_ext_supported",
        ExtSpeeds,
    ),
    ("LinkSpeedExtEnabled", "link_speed_ext_enabled", ExtSpeeds),
];

const SWITCH_INFO: &[(&str, &str, Render)] = &[
    ("LinearFdbCap", "linear_fdb_cap", Number),
    ("RandomFdbCap", "random_fdb_cap", Number),
    ("McastFdbCap", "multicast_fdb_cap", Number),
    ("LinearFdbTop", "linear_fdb_top", Number),
    ("DefPort", "default_port", Number),
    ("DefMcastPrimPort", "default_multicast_primary_port", Number),
    (
        "DefMcastNotPrimPort",
        "default_multicast_not_primary_port",
        Number,
    ),
    ("LifeTime", "life_time_value", Number),
    ("StateChange", "port_state_change", Number),
    (
        "OptSLtoVLMapping",
        "optimized_sl_to_vl_mapping_programming",
        Number,
    ),
    ("LidsPerPort", "lids_per_port", Number),
    ("PartEnforceCap", "partition_enforcement_cap", Number),
    ("InboundPartEnf", "inbound_enforcement_cap", Number),
    ("OutboundPartEnf", "outbound_enforcement_cap", Number),
    ("FilterRawInbound", "filter_raw_inbound_cap", Number),
    ("FilterRawOutbound", "filter_raw_outbound_cap", Number),
    ("EnhancedPort0", "enhanced_port0", Number),
    ("MulticastFDBTop", "multicast_fdb_top", Number),
];

/// `Name:.....value` lines of smpquery output (headers and the indented capability-bit
/// lines skipped).
fn smp_fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with(char::is_whitespace))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            Some((
                name.to_string(),
                rest.trim_start_matches('.').trim().to_string(),
            ))
        })
        .collect()
}

fn number(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("not a number: {text:?}"))
}

/// "a or b or c" -> OR of each token's bit; libibmad prints bits it has no name for as
/// "undefined (N)" with N the whole value.
fn bit_set(text: &str, names: &[(&str, u64)]) -> Result<u64, String> {
    let mut value = 0;
    for token in text.split(" or ") {
        if let Some(n) = token
            .strip_prefix("undefined (")
            .and_then(|t| t.strip_suffix(')'))
        {
            return number(n);
        }
        match names.iter().find(|(name, _)| *name == token) {
            Some((_, bit)) => value |= bit,
            None if token == "0" => {}
            None => return Err(format!("unknown token {token:?} in {text:?}")),
        }
    }
    Ok(value)
}

fn one_of(text: &str, names: &[(&str, u64)]) -> Result<u64, String> {
    names
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, v)| *v)
        .ok_or_else(|| format!("unknown value {text:?}"))
}

fn smp_value(render: Render, text: &str) -> Result<u64, String> {
    match render {
        Number => number(text),
        NodeType => one_of(
            text,
            &[("Channel Adapter", 1), ("Switch", 2), ("Router", 3)],
        ),
        Widths => bit_set(
            text,
            &[("1X", 1), ("4X", 2), ("8X", 4), ("12X", 8), ("2X", 16)],
        ),
        Speeds => bit_set(text, &[("2.5 Gbps", 1), ("5.0 Gbps", 2), ("10.0 Gbps", 4)]),
        ExtSpeeds => bit_set(
            text,
            &[
                ("No Extended Speed", 0),
                ("14.0625 Gbps", 1),
                ("25.78125 Gbps", 2),
                ("53.125 Gbps", 4),
                ("106.25 Gbps", 8),
            ],
        ),
        PortState => one_of(
            text,
            &[
                ("NoChange", 0),
                ("Down", 1),
                ("Initialize", 2),
                ("Armed", 3),
                ("Active", 4),
            ],
        ),
        PhysState => one_of(
            text,
            &[
                ("NoChange", 0),
                ("Sleep", 1),
                ("Polling", 2),
                ("Disabled", 3),
                ("PortConfigurationTraining", 4),
                ("LinkUp", 5),
                ("LinkErrorRecovery", 6),
                ("PhyTest", 7),
            ],
        ),
        LinkDownDefault => one_of(text, &[("NoChange", 0), ("Sleep", 1), ("Polling", 2)]),
        Mtu => one_of(
            text,
            &[
                ("256", 1),
                ("512", 2),
                ("1024", 3),
                ("2048", 4),
                ("4096", 5),
            ],
        ),
        Vls => one_of(
            text,
            &[
                ("VL0", 1),
                ("VL0-1", 2),
                ("VL0-3", 3),
                ("VL0-7", 4),
                ("VL0-14", 5),
            ],
        ),
    }
}

/// A field's raw value: numbers as they are, booleans as bits, GUIDs from their hex text.
fn json_number(v: &Value) -> Option<u64> {
    match v {
        Value::Bool(b) => Some(u64::from(*b)),
        Value::String(_) => json_guid(v),
        other => other.as_u64(),
    }
}

/// Where ibscope gives a coded field by name: whether the name is smpquery's text (an MTU
/// in bytes, a width in lower case as ibscope writes widths everywhere).
fn name_mismatch(render: Render, text: &str, named: &Value) -> Option<String> {
    let same = match render {
        NodeType | PortState | PhysState | LinkDownDefault | Vls => named.as_str() == Some(text),
        Mtu => named.as_u64().map(|b| b.to_string()).as_deref() == Some(text),
        Widths => named.as_str().map(str::to_uppercase).as_deref() == Some(text),
        _ => return Some(format!("{named} is named, smpquery prints it raw")),
    };
    (!same).then(|| format!("smpquery {text:?}, ibscope {named}"))
}

/// Compare one smpquery output with one ibscope JSON object; mismatches go to `problems`.
/// Returns how many fields were compared.
fn compare_fields(
    what: &str,
    table: &[(&str, &str, Render)],
    smp_text: &str,
    ours: &Value,
    problems: &mut Vec<String>,
) -> usize {
    let fields = smp_fields(smp_text);
    let mut compared = 0;
    for (name, text) in &fields {
        if name == "Mkey" {
            // smpquery hides it; ibscope leaves it out of its JSON.
            continue;
        }
        let Some((_, key, render)) = table.iter().find(|(n, _, _)| n == name) else {
            problems.push(format!("{what}: smpquery field {name} has no mapping"));
            continue;
        };
        let expected = match smp_value(*render, text) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("{what}: {name}: {e}"));
                continue;
            }
        };
        // A coded field is given by name, its code kept under "raw".
        let raw = ours.get("raw").and_then(|r| r.get(*key));
        if let Some(problem) = raw.and_then(|_| name_mismatch(*render, text, &ours[*key])) {
            problems.push(format!("{what}: {name}: {problem}"));
        }
        match raw.or_else(|| ours.get(*key)).and_then(json_number) {
            Some(got) if got == expected => compared += 1,
            Some(got) => problems.push(format!(
                "{what}: {name} = {text:?} ({expected}) in smpquery, {key} = {got} in ibscope"
            )),
            None => problems.push(format!("{what}: ibscope JSON has no {key}: {ours}")),
        }
    }
    if fields.len() < table.len() {
        problems.push(format!(
            "{what}: smpquery printed only {} fields:\n{smp_text}",
            fields.len()
        ));
    }
    compared
}

/// One query, both tools, compared. `target` is a LID or a DR path; `port` for PortInfo.
fn check_one(
    sim: &Sim,
    attribute: &str,
    target: &str,
    direct: bool,
    port: Option<u8>,
    problems: &mut Vec<String>,
) -> usize {
    let port_text = port.map(|p| p.to_string());
    let mut smp_args: Vec<&str> = Vec::new();
    if direct {
        smp_args.push("-D");
    }
    smp_args.push(attribute);
    smp_args.push(target);
    if let Some(p) = &port_text {
        smp_args.push(p);
    }
    let mut our_args = vec!["query", "--json"];
    our_args.extend(&smp_args);
    let what = smp_args.join(" ");
    let smp = assert_success(&reference(sim, "smpquery", &smp_args));
    let ours: Value = serde_json::from_str(&assert_success(&ibscope(sim, &our_args)))
        .unwrap_or_else(|e| panic!("{what}: ibscope JSON: {e}"));
    match attribute {
        "nodeinfo" => compare_fields(&what, NODE_INFO, &smp, &ours, problems),
        "portinfo" => compare_fields(&what, PORT_INFO, &smp, &ours, problems),
        "switchinfo" => compare_fields(&what, SWITCH_INFO, &smp, &ours, problems),
        "nodedesc" => {
            let theirs = smp_fields(&smp)
                .into_iter()
                .find(|(n, _)| n == "Node Description")
                .map(|(_, v)| v);
            let mine = ours["node_description"].as_str().map(str::to_string);
            if theirs.is_none() || theirs != mine {
                problems.push(format!("{what}: smpquery {theirs:?}, ibscope {mine:?}"));
            }
            1
        }
        other => unreachable!("{other}"),
    }
}

/// A node as `ibscope discover --format json` describes it.
struct Target {
    description: String,
    switch: bool,
    num_ports: u8,
    dr_path: String,
    /// (port number, LID) of every port with a LID (a switch: port 0 only).
    lids: Vec<(u8, u16)>,
}

fn targets(sim: &Sim) -> Vec<Target> {
    let out = assert_success(&ibscope(sim, &["discover", "--format", "json"]));
    let file: Value = serde_json::from_str(&out).expect("discover JSON");
    assert_eq!(file["report"]["complete"], Value::Bool(true), "{out}");
    file["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            let switch = n["kind"] == "switch";
            let lids = n["ports"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| !switch || p["number"] == 0)
                .map(|p| {
                    (
                        p["number"].as_u64().unwrap() as u8,
                        p["lid"].as_u64().unwrap() as u16,
                    )
                })
                .filter(|&(_, lid)| lid != 0)
                .collect();
            Target {
                description: n["description"].as_str().unwrap().to_string(),
                switch,
                num_ports: n["num_ports"].as_u64().unwrap() as u8,
                dr_path: n["dr_path"].as_str().expect("dr_path").to_string(),
                lids,
            }
        })
        .collect()
}

/// Every attribute of every node (by DR path and by each LID); `ports` picks the ports of
/// a switch to read (all when None).
fn check_fabric(topology: &str, pick: impl Fn(&[Target]) -> Vec<usize>, ports: Option<&[u8]>) {
    let sim = sim(topology);
    let all = targets(&sim);
    let chosen = pick(&all);
    assert!(!chosen.is_empty());
    let mut problems = Vec::new();
    let mut compared = 0;
    let mut queries = 0;
    for &i in &chosen {
        let t = &all[i];
        let switch_ports: Vec<u8> = match ports {
            Some(p) => p.iter().copied().filter(|&p| p <= t.num_ports).collect(),
            None => (0..=t.num_ports).collect(),
        };
        // By directed route: the whole node.
        let mut run = |attribute: &str, target: &str, direct: bool, port: Option<u8>| {
            queries += 1;
            compared += check_one(&sim, attribute, target, direct, port, &mut problems);
        };
        run("nodeinfo", &t.dr_path, true, None);
        run("nodedesc", &t.dr_path, true, None);
        if t.switch {
            run("switchinfo", &t.dr_path, true, None);
            for &p in &switch_ports {
                run("portinfo", &t.dr_path, true, Some(p));
            }
        } else {
            for p in 1..=t.num_ports {
                run("portinfo", &t.dr_path, true, Some(p));
            }
        }
        // By LID: each LID the node has.
        for &(port, lid) in &t.lids {
            let lid = lid.to_string();
            run("nodeinfo", &lid, false, None);
            run("nodedesc", &lid, false, None);
            if t.switch {
                run("switchinfo", &lid, false, None);
                for &p in &switch_ports {
                    run("portinfo", &lid, false, Some(p));
                }
            } else {
                run("portinfo", &lid, false, Some(port));
            }
        }
        if t.switch {
            assert_eq!(t.lids.len(), 1, "{}: a switch has one LID", t.description);
        }
    }
    assert!(
        problems.is_empty(),
        "{topology}: {} mismatches in {queries} queries:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // NodeInfo 12 fields, PortInfo 50: make sure the comparison really ran.
    assert!(
        compared > queries * 10,
        "{compared} fields in {queries} queries"
    );
}

fn every_node(all: &[Target]) -> Vec<usize> {
    (0..all.len()).collect()
}

#[test]
fn query_matches_smpquery_on_net() {
    check_fabric("net", every_node, None);
}

#[test]
fn query_matches_smpquery_on_net_1() {
    check_fabric("net.1", every_node, None);
}

#[test]
fn query_matches_smpquery_on_net_2sw2path() {
    check_fabric("net.2sw2path", every_node, None);
}

#[test]
fn query_matches_smpquery_on_net_2sw2path4hca() {
    check_fabric("net.2sw2path4hca", every_node, None);
}

#[test]
fn query_matches_smpquery_on_net_2sw2path4hca2port() {
    check_fabric("net.2sw2path4hca2port", every_node, None);
}

/// The 74-node fat tree: the local leaf, another leaf, a spine and a few hosts; on switches
/// port 0, host-facing and uplink ports (5 of 37) keep the test near 10 s.
#[test]
fn query_matches_smpquery_on_fat_tree_sample() {
    check_fabric(
        "fat-tree-2l-64.topo",
        |all| {
            let switches: Vec<usize> = (0..all.len()).filter(|&i| all[i].switch).collect();
            let cas: Vec<usize> = (0..all.len()).filter(|&i| !all[i].switch).collect();
            let spine = switches
                .iter()
                .copied()
                .find(|&i| all[i].description.starts_with('S'))
                .expect("a spine switch");
            let mut pick = vec![switches[0], spine, *switches.last().unwrap()];
            pick.extend([cas[0], cas[1], cas[cas.len() / 2], *cas.last().unwrap()]);
            pick.sort_unstable();
            pick.dedup();
            pick
        },
        Some(&[0, 1, 18, 19, 36]),
    );
}

/// HDR and 2x links (extended speeds, a narrower width on one link): the fields behind the
/// decoded speeds must match too.
#[test]
fn query_matches_smpquery_on_extended_speeds() {
    let dir = temp_dir();
    let topo = dir.path().join("hdr.topo");
    std::fs::write(
        &topo,
        "Switch 4 \"SW\"\n\
         [1] \"H1\"[1] # \"H1\" lid 2 4xHDR\n\
         [2] \"H2\"[1] # \"H2\" lid 3 2xEDR\n\n\
         Hca 1 \"H1\"\n[1] \"SW\"[1] # \"SW\" lid 1 4xHDR\n\n\
         Hca 1 \"H2\"\n[1] \"SW\"[2] # \"SW\" lid 1 2xEDR\n",
    )
    .unwrap();
    check_fabric(topo.to_str().unwrap(), every_node, None);
}

/// On a switch's external port CapabilityMask is reserved (0 under ibsim): the decoded
/// active speed must come from port 0's IsExtendedSpeedsSupported, as ibnetdiscover does.
#[test]
fn decoded_speed_of_switch_external_port_uses_port0_capabilities() {
    let dir = temp_dir();
    let topo = dir.path().join("hdr.topo");
    std::fs::write(
        &topo,
        "Switch 4 \"SW\"\n[1] \"H1\"[1] # \"H1\" lid 2 4xHDR\n\n\
         Hca 1 \"H1\"\n[1] \"SW\"[1] # \"SW\" lid 1 4xHDR\n",
    )
    .unwrap();
    let sim = sim(topo.to_str().unwrap());
    let out = assert_success(&ibscope(
        &sim,
        &["query", "--json", "-D", "portinfo", "0", "1"],
    ));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["capability_mask"], 0, "{out}");
    assert_eq!(v["decoded"]["speed_active"], "HDR", "{out}");
    assert_eq!(v["decoded"]["width_active"], "4x", "{out}");
}

/// The text output reads as smpquery's does: GUIDs in hex, the node type and the port's
/// states by name, the same values smpquery prints; no codes (those are JSON's `raw`).
#[test]
fn text_gives_guids_in_hex_and_states_by_name_as_smpquery() {
    let sim = sim("net.2sw2path4hca");
    let fields = |text: &str| -> Vec<(String, String)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with(' '))
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect()
    };
    for (attribute, port, pairs) in [
        (
            "nodeinfo",
            None,
            [
                ("NodeType", "node_type"),
                ("Guid", "node_guid"),
                ("PortGuid", "port_guid"),
            ]
            .as_slice(),
        ),
        (
            "portinfo",
            Some("1"),
            &[
                ("LinkState", "port_state"),
                ("PhysLinkState", "port_phys_state"),
                ("LinkDownDefState", "link_down_default_state"),
                ("VLCap", "vl_cap"),
                ("MtuCap", "mtu_cap"),
            ],
        ),
    ] {
        let mut args = vec![attribute, "-D", "0"];
        args.extend(port);
        let theirs = smp_fields(&assert_success(&reference(&sim, "smpquery", &args)));
        let mut ours_args = vec!["query"];
        ours_args.extend(&args);
        let text = assert_success(&ibscope(&sim, &ours_args));
        let ours = fields(&text);
        assert!(!ours.iter().any(|(k, _)| k == "raw"), "{text}");
        for (smp_name, our_name) in pairs {
            let expected = &theirs.iter().find(|(n, _)| n == smp_name).unwrap().1;
            let got = &ours.iter().find(|(n, _)| n == our_name).unwrap().1;
            assert_eq!(got, expected, "{attribute} {our_name}:\n{text}");
        }
    }
}

/// `query` reads the live fabric only (a topology file holds no attribute replies) and
/// refuses --topology as `sm` does, before or after its name, without asking the fabric
/// or reading the file: exit 2, nothing on stdout, even with a fabric attached.
#[test]
fn query_refuses_a_topology_file_as_sm_does() {
    let sim = sim("net");
    let missing = "no-such-topology.json";
    for args in [
        &["--topology", missing, "query", "nodeinfo", "1"][..],
        &["query", "--topology", missing, "nodeinfo", "1"],
        &["--topology", missing, "sm"],
        &["sm", "--topology", missing],
    ] {
        let out = ibscope(&sim, args);
        assert_exit(&out, 2);
        assert_eq!(stdout(&out), "", "{args:?} printed an answer");
        let err = stderr(&out);
        assert!(
            err.contains("unexpected argument '--topology'"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains(missing) || err.contains("--topology"),
            "{err}"
        );
    }
    // Without it, the same query answers from the fabric.
    assert_success(&ibscope(&sim, &["query", "nodeinfo", "1"]));
}
