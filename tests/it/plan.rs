//! `check --plan` against the demo's GPU cluster under ibsim: the plan `discover --format
//! plan` writes matches; planted recabling in the plan is reported kind by kind.

use crate::common;

use common::*;
use serde_json::Value;

fn differences(doc: &Value) -> Vec<(String, String)> {
    doc["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_plan_of_a_fabric_matches_and_recabling_is_found() {
    let sim = sim("gpu-cluster.topo");
    let dir = temp_dir();
    let plan = dir.path().join("plan.csv");
    let text = assert_success(&ibscope(&sim, &["discover", "--format", "plan"]));
    assert!(
        text.starts_with("a_node,a_port,z_node,z_port,rate\n"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 128, "a header and 127 cables");
    std::fs::write(&plan, &text).unwrap();
    let out = assert_success(&ibscope(&sim, &["check", "--plan", plan.to_str().unwrap()]));
    assert!(out.contains("as planned: 127 cables"), "{out}");

    // The integrator's plan: rail 1's uplink at 4x, gpu-0003's rail-5 HCA on rail 5's
    // leaf, spine 1's first port elsewhere, a cable nobody laid, and one line lost.
    let leaf = |rail: u8| format!("MF0;leaf-r{rail}-001:MQM9700/U1");
    let spine1 = "MF0;spine-0001:MQM8790/U1";
    let mut planned: Vec<String> = Vec::new();
    // A line is the cable between these two ports, whichever end it names first.
    let is = |line: &str, x: (&str, &str), y: (&str, &str)| {
        let f: Vec<&str> = line.split(',').collect();
        ((f[0], f[1]) == x && (f[2], f[3]) == y) || ((f[0], f[1]) == y && (f[2], f[3]) == x)
    };
    for line in text.lines() {
        let line = if is(line, (&leaf(1), "9"), (spine1, "2")) {
            line.replace("1xHDR", "4xHDR")
        } else if is(line, (&leaf(6), "17"), ("gpu-0003 mlx5_5", "1")) {
            format!("{},3,gpu-0003 mlx5_5,1,4xHDR", leaf(5))
        } else if is(line, (&leaf(0), "9"), (spine1, "1")) {
            format!("{},9,{spine1},5,4xHDR", leaf(0))
        } else if is(line, (&leaf(0), "1"), ("gpu-0001 mlx5_0", "1")) {
            continue;
        } else {
            line.to_string()
        };
        planned.push(line);
    }
    planned.push(format!("{},18,{},18,", leaf(0), leaf(1)));
    std::fs::write(&plan, planned.join("\n")).unwrap();
    let out = ibscope(&sim, &["check", "--plan", plan.to_str().unwrap(), "--json"]);
    let doc: Value = serde_json::from_str(&assert_exit(&out, 1)).unwrap();
    assert_eq!(doc["as_planned"], false);
    let found = differences(&doc);
    let mut kinds: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        ["below-rate", "extra", "missing", "wrong-node", "wrong-port"],
        "{found:#?}"
    );
    let of = |kind: &str| &found.iter().find(|(k, _)| k == kind).unwrap().1;
    assert!(
        of("below-rate").contains("runs 1xHDR, planned 4xHDR"),
        "{found:#?}"
    );
    assert!(
        of("wrong-node")
            .contains("\"gpu-0003 mlx5_5\"[1] goes to \"MF0;leaf-r6-001:MQM9700/U1\"[17] instead"),
        "{found:#?}"
    );
    assert!(
        of("wrong-port").contains("[9] is cabled to port 1 of"),
        "{found:#?}"
    );
    assert!(of("missing").contains("[18]: missing"), "{found:#?}");
    assert!(of("extra").contains("gpu-0001 mlx5_0"), "{found:#?}");
    // Text output names each and counts them.
    let text = assert_exit(
        &ibscope(&sim, &["check", "--plan", plan.to_str().unwrap()]),
        1,
    );
    assert!(
        text.contains("[wrong-node]")
            && text.contains("5 difference(s) from the plan of 127 cables"),
        "{text}"
    );
    // A plan that is no plan: clear error naming the file and line.
    std::fs::write(&plan, "a_node,a_port,z_node,z_port\nleaf,x,spine,1\n").unwrap();
    let out = ibscope(&sim, &["check", "--plan", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("plan.csv:2: a_port \"x\""),
        "{}",
        stderr(&out)
    );
}
