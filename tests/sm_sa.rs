//! `ibscope sm` against `sminfo`, `ibscope sa nodes --lid` against `saquery NR LID` for every
//! LID, and `ibscope sa paths` against `saquery -p --slid S --dlid D` (single records: SA
//! replies carry one MAD under the simulator).
//!
//! One client at a time per simulator; fabrics run in parallel.

mod common;

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

/// Every LID: every field saquery prints equals ibscope's.
fn nodes_match(topo: &str) {
    let sim = sim(topo);
    let all = json_of(&sim, &["sa", "nodes", "--json"]);
    assert!(all["failures"].as_array().unwrap().is_empty(), "{all:#}");
    let records = all["records"].as_array().unwrap();
    assert!(records.len() >= 2);
    for rec in records {
        let lid = rec["lid"].to_string();
        let mut one = json_of(&sim, &["sa", "nodes", "--lid", &lid, "--json"]);
        assert_eq!(one["schema_version"], all["schema_version"]);
        one.as_object_mut().unwrap().remove("schema_version");
        assert_eq!(&one, rec, "LID {lid}: single query and listing differ");
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
            assert_eq!(num(&f[theirs]), guid_field(rec, ours), "{what}: {theirs}");
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
    let all = json_of(&sim, &["sa", "nodes", "--json"]);
    let lids: Vec<u64> = all["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["lid"].as_u64().unwrap())
        .collect();
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
