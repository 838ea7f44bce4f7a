//! `ibscope sm` against `sminfo`; `ibscope sa` against `saquery`: single records (`sa nodes
//! --lid` against `saquery NR LID` for every LID, `sa paths --src --dst` against `saquery -p
//! --slid S --dlid D`) and whole tables (`sa nodes|paths|links|ports` against `saquery`,
//! `saquery -p`, `saquery LR`, `saquery PIR`).
//!
//! Under the simulator an SA reply is one MAD (the shim does no RMPP): a table longer than
//! that arrives cut, for saquery and ibscope alike. Both must list the same records;
//! ibscope must also say how many the table holds (the SA's count, checked here against
//! saquery asked for every record alone) and exit 1.
//!
//! One client at a time per simulator; fabrics run in parallel.

use crate::common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

fn json_of(sim: &Sim, args: &[&str]) -> Value {
    serde_json::from_str(&assert_success(&ibscope(sim, args))).unwrap()
}

fn num(text: &str) -> u64 {
    let t = text.trim();
    match t.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => t.parse().unwrap(),
    }
}

/// `name.......value` lines of a saquery dump.
fn saquery_fields(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(dots) = line.find("..") else {
            continue;
        };
        let name = line[..dots].to_string();
        let value = line[dots..].trim_start_matches('.').to_string();
        out.insert(name, value);
    }
    out
}

fn guid_field(v: &Value, key: &str) -> u64 {
    num(v[key].as_str().unwrap())
}

#[test]
fn sm_matches_sminfo() {
    for topo in ["net", "net.2sw2path4hca"] {
        let sim = sim(topo);
        // sminfo: sm lid 1 sm guid 0x200000, activity count 86 priority 0 state 3 SMINFO_MASTER
        let theirs = assert_success(&reference(&sim, "sminfo", &[]));
        let words: Vec<&str> = theirs.split_whitespace().collect();
        let after = |k: &str| {
            let i = words.iter().position(|w| *w == k).unwrap();
            words[i + 1].trim_end_matches(',')
        };
        let ours = json_of(&sim, &["sm", "--json"]);
        assert_eq!(ours["lid"].as_u64(), Some(num(after("lid"))), "{theirs}");
        assert_eq!(guid_field(&ours, "guid"), num(after("guid")), "{theirs}");
        assert_eq!(ours["priority"].as_u64(), Some(num(after("priority"))));
        assert_eq!(ours["state_code"].as_u64(), Some(num(after("state"))));
        assert_eq!(ours["state"], "Master");
        assert!(theirs.contains("SMINFO_MASTER"));
        // The activity count only grows; ibscope asked after sminfo.
        assert!(ours["act_count"].as_u64().unwrap() >= num(after("count")));
        // The SA's SMInfoRecord names the same SM.
        let sa = &ours["sa_record"];
        assert!(sa.get("error").is_none(), "{sa}");
        assert_eq!(sa["lid"], ours["lid"]);
        assert_eq!(sa["guid"], ours["guid"]);
        assert_eq!(sa["state"], "Master");
        // The SM node's description, as smpquery prints it.
        let lid = ours["lid"].to_string();
        let nd = assert_success(&reference(&sim, "smpquery", &["nodedesc", &lid]));
        let desc = nd
            .split("Node Description:")
            .nth(1)
            .unwrap()
            .trim_start_matches('.');
        assert_eq!(ours["node_description"].as_str(), Some(desc.trim()));
        // Text form mentions the same facts.
        let text = assert_success(&ibscope(&sim, &["sm"]));
        assert!(text.contains(&format!("LID {lid}")), "{text}");
        assert!(text.contains("state Master"), "{text}");
    }
}

#[test]
fn sm_without_sm_explains() {
    let sim = sim_no_sm("net");
    let out = ibscope(&sim, &["sm"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no subnet manager: the local port's SM LID is 0"),
        "{err}"
    );
    let out = ibscope(&sim, &["sa", "nodes", "--lid", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is opensm running?"));
}

/// The end ports' LIDs (a switch's port 0, each CA port with a LID) and the (LID, port)
/// keys of per-port tables (a switch's ports from `first_switch_port`, each CA port), from
/// ibscope's discovery.
fn fabric_keys(sim: &Sim, first_switch_port: u64) -> (Vec<u64>, Vec<(u64, u64)>) {
    let d: Value = serde_json::from_str(&assert_success(&ibscope(
        sim,
        &["discover", "--format", "json"],
    )))
    .unwrap();
    let (mut lids, mut ports) = (Vec::new(), Vec::new());
    for n in d["nodes"].as_array().unwrap() {
        let switch = n["kind"] == "switch";
        for p in n["ports"].as_array().unwrap() {
            let (num, lid) = (p["number"].as_u64().unwrap(), p["lid"].as_u64().unwrap());
            if lid == 0 {
                continue;
            }
            if !switch || num == 0 {
                lids.push(lid);
            }
            if (switch && num >= first_switch_port) || (!switch && num > 0) {
                ports.push((lid, num));
            }
        }
    }
    lids.sort_unstable();
    lids.dedup();
    ports.sort_unstable();
    (lids, ports)
}

/// Every LID: every field saquery prints equals ibscope's.
fn nodes_match(topo: &str) {
    let sim = sim(topo);
    let (lids, _) = fabric_keys(&sim, 0);
    assert!(lids.len() >= 4, "{lids:?}");
    for lid in lids {
        let lid = lid.to_string();
        let rec = json_of(&sim, &["sa", "nodes", "--lid", &lid, "--json"]);
        let f = saquery_fields(&assert_success(&reference(&sim, "saquery", &["NR", &lid])));
        let what = format!("{topo} LID {lid}: {f:?}");
        assert_eq!(num(&f["lid"]), rec["lid"].as_u64().unwrap(), "{what}");
        // The type by name, as saquery prints it, and by code.
        assert_eq!(f["node_type"], rec["node_type"].as_str().unwrap(), "{what}");
        let code = match rec["kind"].as_str().unwrap() {
            "switch" => 2,
            "router" => 3,
            _ => 1,
        };
        assert_eq!(rec["node_type_code"], code, "{what}");
        for (theirs, ours) in [
            ("num_ports", "num_ports"),
            ("partition_cap", "partition_cap"),
            ("device_id", "device_id"),
            ("revision", "revision"),
            ("port_num", "local_port_num"),
            ("vendor_id", "vendor_id"),
        ] {
            assert_eq!(
                Some(num(&f[theirs])),
                rec[ours].as_u64(),
                "{what}: {theirs}"
            );
        }
        for (theirs, ours) in [
            ("sys_guid", "system_image_guid"),
            ("node_guid", "node_guid"),
            ("port_guid", "port_guid"),
        ] {
            assert_eq!(num(&f[theirs]), guid_field(&rec, ours), "{what}: {theirs}");
        }
        assert_eq!(
            f["NodeDescription"].as_str(),
            rec["node_description"].as_str().unwrap(),
            "{what}"
        );
    }
}

#[test]
fn sa_nodes_match_saquery_net() {
    nodes_match("net");
}

#[test]
fn sa_nodes_match_saquery_2port() {
    nodes_match("net.2sw2path4hca2port");
}

#[test]
fn sa_paths_match_saquery() {
    let sim = sim("net.2sw2path4hca");
    let (lids, _) = fabric_keys(&sim, 0);
    assert!(lids.len() >= 4);
    for &s in &lids {
        for &d in &lids {
            let (ss, ds) = (s.to_string(), d.to_string());
            let f = saquery_fields(&assert_success(&reference(
                &sim,
                "saquery",
                &["-p", "--slid", &ss, "--dlid", &ds],
            )));
            let p = json_of(&sim, &["sa", "paths", "--src", &ss, "--dst", &ds, "--json"]);
            let what = format!("{s} -> {d}: {f:?}\n{p:#}");
            let field = |k: &str| p[k].as_u64().unwrap();
            let flag = |k: &str| u64::from(p[k].as_bool().unwrap());
            assert_eq!(num(&f["slid"]), field("slid"), "{what}");
            assert_eq!(num(&f["dlid"]), field("dlid"), "{what}");
            assert_eq!(f["dgid"].as_str(), p["dgid"].as_str().unwrap(), "{what}");
            assert_eq!(f["sgid"].as_str(), p["sgid"].as_str().unwrap(), "{what}");
            assert_eq!(num(&f["service_id"]), guid_field(&p, "service_id"));
            // libibmad packs RawTraffic, FlowLabel and HopLimit into one word.
            assert_eq!(
                num(&f["hop_flow_raw"]),
                flag("raw_traffic") << 31 | field("flow_label") << 8 | field("hop_limit"),
                "{what}"
            );
            assert_eq!(num(&f["tclass"]), field("traffic_class"), "{what}");
            assert_eq!(
                num(&f["num_path_revers"]),
                flag("reversible") << 7 | field("numb_path"),
                "{what}"
            );
            assert_eq!(num(&f["pkey"]), guid_field(&p, "p_key"), "{what}");
            assert_eq!(num(&f["qos_class"]), field("qos_class"), "{what}");
            assert_eq!(num(&f["sl"]), field("sl"), "{what}");
            for (theirs, sel, val) in [
                ("mtu", "mtu_selector", "mtu"),
                ("rate", "rate_selector", "rate"),
                ("pkt_life", "packet_life_time_selector", "packet_life_time"),
            ] {
                assert_eq!(
                    num(&f[theirs]),
                    field(sel) << 6 | field(val),
                    "{what}: {theirs}"
                );
            }
            assert_eq!(num(&f["preference"]), field("preference"), "{what}");
        }
    }
}

/// The `name....value` blocks of a saquery listing, one per `header` ("NodeRecord dump:").
fn saquery_records(text: &str, header: &str) -> Vec<BTreeMap<String, String>> {
    text.split(header).skip(1).map(saquery_fields).collect()
}

/// A JSON number, or a "0x..." string as ibscope writes GUIDs.
fn json_num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| num(v.as_str().unwrap()))
}

/// How many of `queries` (saquery arguments) saquery finds a `header` record for: the SA
/// asked for each record alone.
fn saquery_hits(sim: &Sim, queries: &[Vec<String>], header: &str) -> usize {
    queries
        .iter()
        .filter(|q| {
            let args: Vec<&str> = q.iter().map(String::as_str).collect();
            stdout(&reference(sim, "saquery", &args)).contains(header)
        })
        .count()
}

/// How many `len`-byte records, `stride` apart from byte 56, lie in the first 224 bytes of
/// a MAD: all the shim delivers intact (its receive buffer holds 64 bytes of umad header
/// and 224 of MAD; the rest of the 256 is read past that buffer: umad2sim.c).
fn intact_records(len: usize, stride: usize) -> usize {
    (224 - 56 - len) / stride + 1
}

/// One table, ibscope against saquery: the same records in the same order (the fields
/// `pairs` name, saquery's name first), and either the whole table (exit 0) or exit 1 with
/// the partial line and the table size the SA confirms record by record (`size`).
///
/// A table cut to one MAD: saquery also lists the records that reach past byte 224 (heap
/// bytes of the shim, different on every run); ibscope lists only those before: `record`
/// is the record's length and stride.
fn assert_table(
    sim: &Sim,
    ours: &[&str],
    theirs: &[&str],
    header: &str,
    pairs: &[(&str, &str)],
    size: usize,
    record: (usize, usize),
) {
    let out = ibscope(sim, ours);
    let what = format!("ibscope {ours:?} / saquery {theirs:?}");
    let listing: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", stderr(&out)));
    let records = listing["records"].as_array().unwrap();
    let saq = saquery_records(&assert_success(&reference(sim, "saquery", theirs)), header);
    assert!(!saq.is_empty(), "{what}: saquery listed nothing");
    let cut_to_one_mad = 56 + saq.len() * record.1 > 224;
    if cut_to_one_mad {
        assert_eq!(
            records.len(),
            intact_records(record.0, record.1),
            "{what}: {listing:#}"
        );
        assert!(saq.len() > records.len(), "{what}: {saq:?}");
    } else {
        assert_eq!(records.len(), saq.len(), "{what}: {listing:#}\n{saq:?}");
    }
    for (i, (o, t)) in records.iter().zip(&saq).enumerate() {
        for (their, our) in pairs {
            assert_eq!(
                json_num(&o[our]),
                num(&t[*their]),
                "{what} record {i}: {t:?} / {o}"
            );
        }
    }
    assert_eq!(listing["received"].as_u64(), Some(records.len() as u64));
    assert_eq!(listing["table_size"].as_u64(), Some(size as u64), "{what}");
    let err = stderr(&out);
    if size > records.len() {
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert_eq!(listing["complete"], false);
        let line = format!(
            "partial: {} record{} of a table the SA says holds {size} (",
            records.len(),
            if records.len() == 1 { "" } else { "s" }
        );
        assert!(err.starts_with(&line), "{what}: {err}");
        // The same on the text output.
        let text = ibscope(sim, &ours[..ours.len() - 1]);
        assert_eq!(text.status.code(), Some(1));
        assert_eq!(stdout(&text).lines().count(), records.len());
        assert!(stderr(&text).starts_with(&line), "{}", stderr(&text));
    } else {
        assert_eq!(size, records.len());
        assert_eq!(out.status.code(), Some(0), "{what}: {err}");
        assert_eq!(listing["complete"], true);
        assert!(!err.contains("partial"), "{err}");
    }
}

/// Every table of `net`: NodeRecords, PathRecords and PortInfoRecords are longer than one
/// MAD (cut under the simulator), the eight LinkRecords fit.
#[test]
fn sa_tables_match_saquery_and_say_what_is_missing() {
    let sim = sim("net");
    let (lids, lid_ports) = fabric_keys(&sim, 0);
    let s = |v: u64| v.to_string();

    let nr: Vec<Vec<String>> = lids.iter().map(|&l| vec!["NR".into(), s(l)]).collect();
    let nodes = saquery_hits(&sim, &nr, "NodeRecord dump:");
    assert_eq!(nodes, lids.len(), "one NodeRecord per end port");
    let pairs = [
        ("lid", "lid"),
        ("port_guid", "port_guid"),
        ("port_num", "local_port_num"),
    ];
    let nr_len = (108, 112);
    assert_table(
        &sim,
        &["sa", "nodes", "--json"],
        &[],
        "NodeRecord dump:",
        &pairs,
        nodes,
        nr_len,
    );

    let mut pr = Vec::new();
    for &a in &lids {
        for &b in &lids {
            pr.push(vec![
                "-p".into(),
                "--slid".into(),
                s(a),
                "--dlid".into(),
                s(b),
            ]);
        }
    }
    let paths = saquery_hits(&sim, &pr, "PathRecord dump:");
    let pairs = [
        ("slid", "slid"),
        ("dlid", "dlid"),
        ("pkey", "p_key"),
        ("sl", "sl"),
    ];
    let ours = ["sa", "paths", "--json"];
    assert_table(
        &sim,
        &ours,
        &["-p"],
        "PathRecord dump:",
        &pairs,
        paths,
        (64, 64),
    );

    let key = |(l, p): &(u64, u64)| format!("{l}/{p}");
    let lr: Vec<Vec<String>> = lid_ports
        .iter()
        .filter(|(_, p)| *p > 0)
        .map(|k| vec!["LR".into(), key(k)])
        .collect();
    let links = saquery_hits(&sim, &lr, "LinkRecord dump:");
    assert_eq!(links, 8, "four links, both directions");
    let pairs = [
        ("FromLID", "from_lid"),
        ("FromPort", "from_port"),
        ("ToLID", "to_lid"),
        ("ToPort", "to_port"),
    ];
    let ours = ["sa", "links", "--json"];
    assert_table(
        &sim,
        &ours,
        &["LR"],
        "LinkRecord dump:",
        &pairs,
        links,
        (8, 8),
    );

    let pir: Vec<Vec<String>> = lid_ports
        .iter()
        .map(|k| vec!["PIR".into(), key(k)])
        .collect();
    let ports = saquery_hits(&sim, &pir, "PortInfoRecord dump:");
    let pairs = [
        ("EndPortLid", "endport_lid"),
        ("PortNum", "port_num"),
        ("Lid:", "lid"),
    ];
    let header = "PortInfoRecord dump:";
    assert_table(
        &sim,
        &["sa", "ports", "--json"],
        &["PIR"],
        header,
        &pairs,
        ports,
        (68, 72),
    );
    // One LID's ports: a switch's nine.
    let one: Vec<Vec<String>> = pir
        .iter()
        .filter(|q| q[1].starts_with("1/"))
        .cloned()
        .collect();
    let ports_1 = saquery_hits(&sim, &one, header);
    assert_eq!(ports_1, 9, "Switch1: ports 0 to 8");
    let ours = ["sa", "ports", "--lid", "1", "--json"];
    assert_table(
        &sim,
        &ours,
        &["PIR", "1"],
        header,
        &pairs,
        ports_1,
        (68, 72),
    );
}

/// A LinkRecord table longer than one MAD: the demo fabric's 32 links.
#[test]
fn sa_links_of_a_larger_fabric_are_partial_under_the_simulator() {
    let sim = sim("demo.topo");
    let (_, lid_ports) = fabric_keys(&sim, 1);
    let lr: Vec<Vec<String>> = lid_ports
        .iter()
        .map(|(l, p)| vec!["LR".into(), format!("{l}/{p}")])
        .collect();
    let links = saquery_hits(&sim, &lr, "LinkRecord dump:");
    assert_eq!(links, 64, "32 links, both directions");
    let pairs = [("FromLID", "from_lid"), ("ToLID", "to_lid")];
    let ours = ["sa", "links", "--json"];
    assert_table(
        &sim,
        &ours,
        &["LR"],
        "LinkRecord dump:",
        &pairs,
        links,
        (8, 8),
    );
}

/// A lane speed as libibmad prints PortInfo's LinkSpeedActive and LinkSpeedExtActive, by
/// its IBA name (IBA 14.2.5.6: SDR 2.5, DDR 5.0, QDR 10.0 Gb/s; extended FDR 14.0625, EDR
/// 25.78125, HDR 53.125).
fn speed_name(printed: &str) -> Option<&'static str> {
    Some(match printed.trim() {
        "2.5 Gbps" => "SDR",
        "5.0 Gbps" => "DDR",
        "10.0 Gbps" => "QDR",
        "14.0625 Gbps" => "FDR",
        "25.78125 Gbps" => "EDR",
        "53.125 Gbps" => "HDR",
        _ => return None,
    })
}

/// `name:....value` lines of a saquery PortInfo dump (a colon ends the name).
fn port_info_fields(text: &str) -> BTreeMap<String, String> {
    saquery_fields(text)
        .into_iter()
        .map(|(k, v)| (k.trim_end_matches(':').to_string(), v))
        .collect()
}

/// Every switch port `sa ports` lists on an all-HDR fabric (the demo's, whose one slow
/// link is 1xHDR), against saquery on the same SA: the width it prints, and the lane speed
/// the specification's rule gives from its fields. LinkSpeedExtActive counts where port 0
/// of the switch says IsExtendedSpeedsSupported (an external port's own CapabilityMask is
/// reserved, 0 here); else LinkSpeedActive does. So every port reads HDR, never QDR.
#[test]
fn sa_ports_read_a_switch_port_at_its_extended_speed() {
    let sim = sim("gpu-cluster.topo");
    let d: Value = serde_json::from_str(&assert_success(&ibscope(
        &sim,
        &["discover", "--format", "json"],
    )))
    .unwrap();
    let switch_lids: Vec<u64> = d["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "switch")
        .filter_map(|n| n["ports"][0]["lid"].as_u64())
        .collect();
    assert_eq!(switch_lids.len(), 16);
    let mut external = 0;
    for lid in switch_lids {
        let lid = lid.to_string();
        let port0 = stdout(&reference(&sim, "saquery", &["PIR", &format!("{lid}/0")]));
        assert!(port0.contains("IsExtendedSpeedsSupported"), "{port0}");
        let out = ibscope(&sim, &["sa", "ports", "--lid", &lid, "--json"]);
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        for r in v["records"].as_array().unwrap() {
            let port = r["port_num"].as_u64().unwrap();
            if port == 0 {
                continue;
            }
            let theirs = port_info_fields(&stdout(&reference(
                &sim,
                "saquery",
                &["PIR", &format!("{lid}/{port}")],
            )));
            let what = format!("LID {lid} port {port}: {theirs:?}");
            assert_eq!(theirs["CapMask"], "0x0", "{what}");
            let width = theirs["LinkWidthActive"].to_lowercase();
            let speed = speed_name(&theirs["LinkSpeedExtActive"])
                .or_else(|| speed_name(&theirs["LinkSpeedActive"]))
                .unwrap();
            assert_eq!(speed, "HDR", "{what}");
            assert_eq!(r["width_active"], width.as_str(), "{what}");
            assert_eq!(r["speed_active"], speed, "{what}");
            external += 1;
        }
        let text = stdout(&ibscope(&sim, &["sa", "ports", "--lid", &lid]));
        assert!(text.contains("HDR") && !text.contains("QDR"), "{text}");
    }
    assert!(external >= 16, "{external} switch ports compared");
}
