//! Names: whatever ibscope prints as a name, it takes back. On the demo fabric every name
//! the commands print (check, links, hosts, counters, route; their JSON and their text),
//! the demo's own planted line (ibsim's node ids, `R1L001[9]`) and the TUI's rows (short
//! switch names, `name[port]` cut to the Links view's width at 80 columns) resolves, each
//! to the node it was printed for where the output says which (a GUID beside it); and the
//! commands that take a node take them (docs/cli.md, "Names").

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use ibscope::cmd::demo::faults;
use ibscope_topo::health::HealthOptions;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::resolve::{NameMatch, NamedTarget, Resolved, Resolver};
use ibscope_topo::Fabric;
use serde_json::Value;

/// What a name was printed for, where the output says: a node GUID and maybe a port.
type Meant = Option<(u64, Option<u8>)>;

/// Names collected from outputs, each with what it was printed for (when known).
#[derive(Default)]
struct Printed(BTreeMap<String, (Meant, String)>);

impl Printed {
    fn add(&mut self, name: &str, meant: Meant, from: &str) {
        let name = name.trim();
        if !name.is_empty() {
            let entry = self
                .0
                .entry(name.to_string())
                .or_insert((meant, from.to_string()));
            entry.0 = entry.0.or(meant);
        }
    }
}

fn guid_of(v: &Value) -> Option<u64> {
    json_guid(v)
}

/// The names in a JSON document: every `node`, `host` and `name` string (not a fabric's),
/// a port reference's name with its port (`name[port]`, and its GUID for the check), and
/// each host's HCAs as `host device`.
fn from_json(v: &Value, path: &str, out: &mut Printed, from: &str) {
    match v {
        Value::Object(m) => {
            let guid = m.get("guid").or_else(|| m.get("node_guid"));
            if let (Some(Value::String(node)), Some(guid)) = (m.get("node"), guid) {
                let guid = guid_of(guid);
                let port = m.get("port").and_then(Value::as_u64).map(|p| p as u8);
                out.add(node, guid.map(|g| (g, None)), from);
                if let (Some(g), Some(p)) = (guid, port) {
                    out.add(&format!("{node}[{p}]"), Some((g, Some(p))), from);
                }
            }
            if let (Some(Value::String(host)), Some(Value::Array(hcas))) =
                (m.get("name"), m.get("hcas"))
            {
                for hca in hcas {
                    if let Some(device) = hca["device"].as_str() {
                        out.add(&format!("{host} {device}"), None, from);
                    }
                }
            }
            for (k, x) in m {
                let here = format!("{path}.{k}");
                match (k.as_str(), x) {
                    ("node" | "host" | "name", Value::String(s)) if !path.ends_with("fabric") => {
                        out.add(s, None, from)
                    }
                    _ => from_json(x, &here, out, from),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| from_json(x, path, out, from)),
        _ => {}
    }
}

/// The names in text as reports print them: `"name"`, `"name" (0x…)`, each maybe with
/// `[port]`.
fn from_text(text: &str, out: &mut Printed, from: &str) {
    for line in text.lines() {
        let mut rest = line;
        while let Some(open) = rest.find('"') {
            let Some(len) = rest[open + 1..].find('"') else {
                break;
            };
            let name = &rest[open + 1..open + 1 + len];
            let mut after = &rest[open + 2 + len..];
            out.add(&format!("\"{name}\""), None, from);
            let mut printed = format!("\"{name}\"");
            if let Some(hex) = after.strip_prefix(" (0x").and_then(|a| a.get(..17)) {
                if let (Ok(guid), true) = (u64::from_str_radix(&hex[..16], 16), hex.ends_with(')'))
                {
                    printed.push_str(&format!(" (0x{})", &hex[..16]));
                    out.add(&printed, Some((guid, None)), from);
                    after = &after[19..];
                }
            }
            if let Some(port) = after
                .strip_prefix('[')
                .and_then(|a| a.split_once(']'))
                .and_then(|(p, _)| p.parse::<u8>().ok())
            {
                out.add(&format!("{printed}[{port}]"), None, from);
            }
            rest = after;
        }
    }
}

/// Names in columns: the text before each line's first ` 0x` GUID (counters), or after the
/// GUID to the line's end (route trace, route dump).
fn around_guids(text: &str, before: bool, out: &mut Printed, from: &str) {
    for line in text.lines() {
        let Some(at) = line.find(" 0x") else {
            continue;
        };
        let hex = line[at + 3..].get(..16).unwrap_or("");
        let Ok(guid) = u64::from_str_radix(hex, 16) else {
            continue;
        };
        let name = if before {
            line[..at].trim()
        } else {
            line[at + 19..].trim()
        };
        out.add(name, Some((guid, None)), from);
    }
}

/// The hosts table's HOST, HCA (as `host hca`) and LEAF columns; the HCAs it lists as
/// `missing` (not in the fabric) apart.
fn from_hosts_table(text: &str, out: &mut Printed) -> Vec<String> {
    let mut missing = Vec::new();
    let rows = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("HOST"));
    for line in rows {
        let cells: Vec<&str> = line.split_whitespace().collect();
        if cells.len() >= 9 {
            let hca = format!("{} {}", cells[0], cells[2]);
            out.add(cells[0], None, "hosts");
            out.add(cells[7], None, "hosts");
            match cells[6] {
                "missing" => missing.push(hca),
                _ => out.add(&hca, None, "hosts"),
            }
        }
    }
    missing
}

/// The rows the TUI shows for this fabric: layer chips (short switch names), node rows,
/// link ends as the Links view cuts them at 80 columns, the hosts grid.
fn from_tui(fabric: &Fabric, out: &mut Printed) {
    use ibscope_tui::derive;
    use ibscope_tui::views::widgets::name_and_port;
    let health = derive::LinkHealth::assess(fabric, &HealthOptions::default());
    let summary = derive::summarize(fabric, &health, None);
    for chip in summary.layers.iter().flat_map(|l| &l.switches) {
        let guid = fabric.node(chip.id).guid;
        out.add(&chip.short, Some((guid, None)), "tui overview");
        out.add(&chip.name, Some((guid, None)), "tui overview");
    }
    for row in derive::node_rows(fabric, None) {
        out.add(
            &row.name,
            Some((fabric.node(row.id).guid, None)),
            "tui nodes",
        );
    }
    // The Links view's end columns at 80 columns: (80 - 29) / 2 (see tui/src/views/links.rs).
    let width = (80 - 29) / 2;
    for row in derive::link_rows(fabric, &health, None) {
        for end in [row.a, row.b] {
            let node = fabric.node(end.node);
            let shown = name_and_port(&derive::node_name(node, None), end.port, width);
            out.add(&shown, Some((node.guid, Some(end.port))), "tui links");
        }
    }
    for row in derive::host_grid(fabric, &health, None).rows {
        out.add(&row.name, None, "tui hosts");
    }
}

/// What a command printed, whether it found something (1) or not (0).
fn ran(sim: &Sim, args: &[&str]) -> String {
    let out = ibscope(sim, args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        stderr(&out)
    );
    stdout(&out)
}

fn json(sim: &Sim, args: &[&str], code: i32) -> Value {
    serde_json::from_str(&assert_exit(&ibscope(sim, args), code)).unwrap()
}

/// The demo's fabric with its counters planted as the demo plants them.
fn demo_fabric() -> Sim {
    let sim = sim("gpu-cluster.topo");
    ibscope::cmd::demo::plant_counters(&sim).unwrap();
    sim
}

#[test]
fn every_name_ibscope_prints_resolves_to_what_it_was_printed_for() {
    let mut printed = Printed::default();
    // The demo: its planted line (ibsim's node ids) and its report.
    let demo = ibscope_plain(&["demo", "--once"], &[]);
    let report = assert_exit(&demo, 1);
    from_text(&report, &mut printed, "demo");
    let planted = stderr(&demo);
    let planted = planted
        .lines()
        .find_map(|l| l.strip_prefix("planted: "))
        .unwrap_or_else(|| panic!("no planted line: {planted}"));
    for part in planted.split(", ") {
        let word = part.split_whitespace().last().unwrap_or("");
        let first = part.split_whitespace().next().unwrap_or("");
        for name in [word, first] {
            if name.ends_with(']') || name.starts_with("gpu-") {
                printed.add(name, None, "demo planted");
            }
        }
    }
    assert!(printed.0.contains_key("R1L001[9]"), "{planted}");

    let sim = demo_fabric();
    let snapshot = assert_success(&ibscope(&sim, &["discover", "--format", "json"]));
    let fabric = ibscope_topo::export::json::read(&snapshot).unwrap();
    for args in [
        &["check", "--json"][..],
        &["links", "--json"],
        &["hosts", "--json"],
        &["counters", "--format", "json"],
        &["route", "check", "--json"],
        &["route", "trace", "gpu-0001", "gpu-0003", "--json"],
        &["route", "load", "--pattern", "ring", "--json"],
    ] {
        let from = args.join(" ");
        let text = ran(&sim, args);
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{from}: {e}"));
        from_json(&v, "", &mut printed, &from);
    }
    for args in [
        &["check"][..],
        &["links"],
        &["route", "load", "--pattern", "ring"],
    ] {
        from_text(&ran(&sim, args), &mut printed, &args.join(" "));
    }
    let counters = assert_success(&ibscope(&sim, &["counters"]));
    around_guids(&counters, true, &mut printed, "counters");
    let trace = assert_success(&ibscope(&sim, &["route", "trace", "gpu-0001", "gpu-0003"]));
    around_guids(&trace, false, &mut printed, "route trace");
    let missing = from_hosts_table(&assert_success(&ibscope(&sim, &["hosts"])), &mut printed);
    from_tui(&fabric, &mut printed);

    // Resolved as the commands resolve them under the simulator: ibsim's ids as aliases.
    let mut names = NameMap::new();
    for (id, guid) in ibscope::fabric::sim_node_ids(sim.topology()).unwrap() {
        names.insert_alias(id, guid);
    }
    let resolver = Resolver::new(&fabric, Some(&names));
    let mut failed = Vec::new();
    let mut checked = BTreeSet::new();
    for (name, (meant, from)) in &printed.0 {
        match resolver.resolve_any(name, NameMatch::Exact) {
            Err(e) => failed.push(format!("{name:?} (from {from}): {e}")),
            Ok(Resolved::Server(s)) => {
                assert!(meant.is_none(), "{name:?}: a server, printed for {meant:?}");
                assert!(!s.hcas.is_empty(), "{name:?}");
            }
            Ok(Resolved::Target(t)) => {
                if let Some((guid, port)) = meant {
                    let node = fabric.node(t.node());
                    assert_eq!(
                        node.guid, *guid,
                        "{name:?} (from {from}) names another node"
                    );
                    if let Some(p) = port {
                        assert_eq!(
                            t,
                            NamedTarget::Port(ibscope_topo::End {
                                node: t.node(),
                                port: *p
                            }),
                            "{name:?}"
                        );
                    }
                    checked.insert(name.clone());
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "names ibscope printed that it does not take:\n{}",
        failed.join("\n")
    );
    // An HCA the hosts table lists as missing names nothing; the error says what exists.
    assert_eq!(missing, ["gpu-0006 mlx5_2"]);
    let e = resolver
        .resolve(&missing[0], NameMatch::Exact)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("server \"gpu-0006\" has gpu-0006 mlx5_0, gpu-0006 mlx5_1, gpu-0006 mlx5_3"),
        "{e}"
    );
    for expected in [
        "leaf-r4-001",
        "MF0;leaf-r4-001:MQM9700/U1",
        "gpu-0001",
        "gpu-0001 mlx5_1",
        "R1L001[9]",
        "R4L001[4]",
    ] {
        assert!(
            printed.0.contains_key(expected),
            "{expected} was not collected"
        );
    }
    assert!(
        printed.0.keys().any(|n| n.contains('…')),
        "no elided TUI name collected"
    );
    assert!(
        checked.len() > 100,
        "only {} names checked against a GUID",
        checked.len()
    );

    // The demo's names for its faults are the ends check reports them at.
    let check = json(&sim, &["check", "--json"], 1);
    let finding_ends = |kind: &str| -> Vec<(u64, u64)> {
        check["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == kind)
            .flat_map(|f| [&f["at"], &f["remote"]])
            .filter_map(|e| Some((guid_of(&e["node_guid"])?, e["port"].as_u64()?)))
            .collect()
    };
    for (name, kind) in [
        ("R1L001[9]", "degraded-link"),
        ("R4L001[4]", "counter-above-threshold"),
    ] {
        let end = resolver
            .resolve(name, NameMatch::Exact)
            .unwrap()
            .end(&fabric);
        let at = (fabric.node(end.node).guid, u64::from(end.port));
        assert!(
            finding_ends(kind).contains(&at),
            "{name}: {at:?} not a {kind} end"
        );
    }
}

/// The commands take the names they print: counters by ibsim's id and port, query by a
/// short name, route trace between two servers rail by rail, route load with a name that
/// holds a space; and counters says what a node has, as port disable does.
#[test]
fn commands_take_the_names_they_print() {
    let sim = demo_fabric();
    let (node, port, value) = faults::SYMBOL_ERRORS;
    let c = json(
        &sim,
        &["counters", &format!("{node}[{port}]"), "--format", "json"],
        0,
    );
    let ports = c["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 1, "{c}");
    assert_eq!(ports[0]["port"], u64::from(port));
    assert!(ports[0]["node"].as_str().unwrap().contains("leaf-r4-001"));
    assert_eq!(ports[0]["counters"]["SymbolErrorCounter"], value, "{c}");

    let q = assert_success(&ibscope(&sim, &["query", "nodedesc", "leaf-r4-001"]));
    assert!(
        q.contains("node_description: MF0;leaf-r4-001:MQM9700/U1"),
        "{q}"
    );

    let t = json(
        &sim,
        &["route", "trace", "gpu-0001", "gpu-0003", "--json"],
        0,
    );
    let traces = t["traces"].as_array().unwrap();
    let rails: Vec<u64> = traces.iter().map(|t| t["rail"].as_u64().unwrap()).collect();
    assert_eq!(rails, (0..8).collect::<Vec<_>>());
    for tr in traces {
        let hops = tr["hops"].as_array().unwrap();
        let last = hops.last().unwrap()["node"]["name"].as_str().unwrap();
        assert_eq!(last, format!("gpu-0003 mlx5_{}", tr["rail"]), "{tr}");
    }
    let out = ibscope(&sim, &["route", "trace", "gpu-0006", "gpu-0001"]);
    assert_success(&out);
    assert!(stderr(&out).contains("rail 2 not traced: \"gpu-0006\" has no HCA port on it"));

    let hosts = "gpu-0001 mlx5_1,gpu-0002 mlx5_1";
    let l = json(
        &sim,
        &[
            "route",
            "load",
            "--pattern",
            "ring",
            "--hosts",
            hosts,
            "--json",
        ],
        0,
    );
    assert_eq!(l["flows"].as_array().map(Vec::len), Some(2), "{l}");
    let job = ibscope(&sim, &["route", "load", "--hosts", "gpu-0001 mlx5_1"]);
    assert_exit(&job, 2);
    assert!(stderr(&job).contains("\"gpu-0001 mlx5_1\": a job runs on servers"));

    // A port the node lacks: both commands say which it has.
    let leaf = "leaf-r4-001";
    let counters = ibscope(&sim, &["counters", leaf, "99"]);
    let port = ibscope(&sim, &["port", "disable", leaf, "99"]);
    let said = |out: &std::process::Output| {
        assert_exit(out, 2);
        stderr(out)
    };
    let (c, p) = (said(&counters), said(&port));
    assert!(c.contains("has ports 1-18; there is no port 99"), "{c}");
    assert_eq!(c, p, "counters and port disable say the same");
    let e = said(&ibscope(&sim, &["counters", "gpu-0001"]));
    assert!(
        e.contains("\"gpu-0001\" is a server with 8 HCA ports (gpu-0001 mlx5_0, "),
        "{e}"
    );
}
