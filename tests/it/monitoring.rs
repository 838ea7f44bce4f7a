//! What operators point Prometheus and Grafana at: the shipped dashboard and alert rules
//! are checked against a real scrape of `ibscope serve` on the simulated fabric (every
//! metric and label they name exists, every query parses and runs in a real Prometheus),
//! the rules pass `promtool check rules` and their unit tests, and serve takes its
//! defaults from the config file and reports a missing master SM.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::net::*;
use common::*;
use serde_json::Value;

const DASHBOARD: &str = "examples/grafana/ibscope-fabric.json";
const RULES: &str = "examples/prometheus/ibscope-alerts.yml";
const RULE_TESTS: &str = "examples/prometheus/ibscope-alerts.test.yml";

/// Labels only a GPU fabric's HCA ports carry: `host` where a CA belongs to a server,
/// `rail` where its device names one (the example fabric's HCAs, "Hca1", have none). A
/// query may name them and find nothing on a fabric without them; where the page has
/// them they are checked like every other label.
const HOST_LABELS: [&str; 2] = ["host", "rail"];
/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// What one PromQL expression refers to.
#[derive(Debug, Default)]
struct Refs {
    /// Each selector: metric name and the labels its matchers name.
    selectors: Vec<(String, Vec<String>)>,
    /// Labels of by/without/on/ignoring/group_left/group_right clauses.
    grouping: Vec<String>,
}

/// A small PromQL scanner: selectors (`name{...}`) and grouping clauses. Strings are
/// skipped, so label values and regexes are never taken for names.
fn promql_refs(expr: &str) -> Refs {
    let chars: Vec<char> = expr.chars().collect();
    let mut refs = Refs::default();
    let mut i = 0;
    let skip_ws = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        j
    };
    let ident = |j: usize| {
        let mut k = j;
        while k < chars.len() && (chars[k].is_alphanumeric() || chars[k] == '_' || chars[k] == ':')
        {
            k += 1;
        }
        (chars[j..k].iter().collect::<String>(), k)
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let (word, end) = ident(i);
            let next = skip_ws(end);
            let grouping = matches!(
                word.as_str(),
                "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
            );
            if next < chars.len() && chars[next] == '{' {
                let close = closing(&chars, next, '}');
                let inner: String = chars[next + 1..close].iter().collect();
                refs.selectors.push((word, matcher_labels(&inner)));
                i = close + 1;
            } else if grouping && next < chars.len() && chars[next] == '(' {
                let close = closing(&chars, next, ')');
                let inner: String = chars[next + 1..close].iter().collect();
                refs.grouping.extend(
                    inner
                        .split(',')
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_string),
                );
                i = close + 1;
            } else {
                i = end;
            }
        } else {
            i += 1;
        }
    }
    refs
}

/// The index of the first `close` after `from` outside a string.
fn closing(chars: &[char], from: usize, close: char) -> usize {
    let mut i = from + 1;
    while i < chars.len() && chars[i] != close {
        if chars[i] == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
        }
        i += 1;
    }
    assert!(
        i < chars.len(),
        "no {close:?} in {}",
        chars.iter().collect::<String>()
    );
    i
}

/// `a="x", b=~"y|z"` -> [a, b] (values may hold any character but an unescaped quote).
fn matcher_labels(inner: &str) -> Vec<String> {
    let mut labels = Vec::new();
    let mut rest = inner;
    while let Some(op) = rest.find(['=', '!']) {
        labels.push(rest[..op].trim().trim_start_matches(',').trim().to_string());
        let quote = rest[op..].find('"').expect("a quoted label value") + op;
        let mut close = quote + 1;
        while rest.as_bytes()[close] != b'"' {
            close += if rest.as_bytes()[close] == b'\\' {
                2
            } else {
                1
            };
        }
        rest = &rest[close + 1..];
    }
    labels
}

#[test]
fn promql_scanner_finds_selectors_and_grouping() {
    let r = promql_refs(
        "topk(10, sum by (node_name, port) (rate(a_total{job=~\"$job\", kind=\"x{y}\"}[1m]))) \
         / on (job) group_left () b{} and up",
    );
    assert_eq!(
        r.selectors,
        [
            (
                "a_total".to_string(),
                vec!["job".to_string(), "kind".to_string()]
            ),
            ("b".to_string(), vec![])
        ]
    );
    assert_eq!(r.grouping, ["node_name", "port", "job"]);
}

/// Families of a scraped page and the labels of each.
fn families(page: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in page
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, labels) = match line.split_once('{') {
            Some((n, rest)) => (n, rest.rsplit_once('}').unwrap().0),
            None => (line.split(' ').next().unwrap(), ""),
        };
        let entry = out.entry(name.to_string()).or_default();
        for l in matcher_labels(labels) {
            entry.insert(l);
        }
    }
    out
}

/// Every metric and label `expr` names exists on the page (`up` comes from Prometheus);
/// the host/rail labels may be absent. Returns what is wrong.
fn check_refs(what: &str, expr: &str, page: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let refs = promql_refs(expr);
    let mut wrong = Vec::new();
    if refs.selectors.is_empty() {
        wrong.push(format!("{what}: no metric selector in {expr}"));
    }
    let known = |metric: &str, label: &str| {
        TARGET_LABELS.contains(&label)
            || (metric != "up" && page.get(metric).is_some_and(|ls| ls.contains(label)))
    };
    let optional =
        |label: &str| HOST_LABELS.contains(&label) && !page.values().any(|ls| ls.contains(label));
    for (metric, labels) in &refs.selectors {
        if metric != "up" && !page.contains_key(metric) {
            wrong.push(format!("{what}: no metric {metric} on the exporter's page"));
        }
        for l in labels {
            if !known(metric, l) && !optional(l) {
                wrong.push(format!("{what}: {metric} has no label {l}"));
            }
        }
    }
    for l in &refs.grouping {
        if !refs.selectors.iter().any(|(m, _)| known(m, l)) && !optional(l) {
            wrong.push(format!("{what}: no metric of `{expr}` has label {l}"));
        }
    }
    // Every bare mention of a metric is a selector too (so each carries its job filter).
    let bare = expr.matches("ibscope_").count();
    let selected = refs
        .selectors
        .iter()
        .filter(|(m, _)| m.starts_with("ibscope_"))
        .count();
    if bare != selected {
        wrong.push(format!(
            "{what}: a metric without a {{...}} selector in {expr}"
        ));
    }
    wrong
}

/// (panel title, expression) of every query in the dashboard.
fn dashboard_queries(dash: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = dash["panels"].as_array().unwrap().iter().collect();
    while let Some(p) = panels.pop() {
        if let Some(inner) = p["panels"].as_array() {
            panels.extend(inner);
        }
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("no expr: {t}"));
            out.push((p["title"].as_str().unwrap().to_string(), expr.to_string()));
        }
    }
    out
}

/// The expressions of the rule file (`expr:` values, block scalars included).
fn rule_queries(yaml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut alert = String::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if let Some(name) = t.strip_prefix("- alert: ") {
            alert = name.trim().to_string();
        } else if let Some(v) = t.strip_prefix("expr: ") {
            let indent = line.len() - t.len();
            let expr = if v.trim() == "|" {
                let mut block = Vec::new();
                while let Some(next) = lines.peek() {
                    let nt = next.trim_start();
                    if !nt.is_empty() && next.len() - nt.len() <= indent {
                        break;
                    }
                    block.push(nt.to_string());
                    lines.next();
                }
                block.join("\n")
            } else {
                v.trim().to_string()
            };
            out.push((alert.clone(), expr));
        }
    }
    out
}

/// Grafana's variables as a dashboard on this Prometheus would fill them in.
fn grafana_substitute(expr: &str, job: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__range", "1h")
        .replace("$__interval", "15s")
        .replace("$job", job)
        .replace("$fabric", ".*")
}

#[test]
fn dashboard_is_importable_and_describes_its_panels() {
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join(DASHBOARD)).unwrap())
            .expect("the dashboard is JSON");
    assert_eq!(dash["uid"], "ibscope-fabric");
    assert!(dash["schemaVersion"].as_u64().unwrap() >= 36);
    // Datasource by variable: works imported by hand and provisioned from a file.
    let vars: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "job", "fabric"]);
    let mut ids = BTreeSet::new();
    let mut titles = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "duplicate panel id");
        let kind = p["type"].as_str().unwrap();
        assert!(
            ["row", "stat", "bargauge", "table", "timeseries", "heatmap"].contains(&kind),
            "{kind}: not a core panel type"
        );
        titles.push(p["title"].as_str().unwrap().to_string());
        if kind == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        assert!(
            !p["description"].as_str().unwrap_or("").is_empty(),
            "{}",
            p["title"]
        );
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}: no query", p["title"]);
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}");
            let expr = t["expr"].as_str().unwrap();
            // Every query follows the job picker, and the fabric picker (but for `up`,
            // Prometheus' own series, which has no fabric).
            for (name, labels) in promql_refs(expr).selectors {
                let has = |l: &str| labels.iter().any(|x| x == l);
                assert!(
                    has("job") && (name == "up" || has("fabric")),
                    "{}: a selector without job or fabric: {expr}",
                    p["title"]
                );
            }
        }
    }
    // The panels the operators asked for.
    for wanted in [
        "Findings by kind",
        "Degraded links",
        "Ports up but not Active",
        "Top 10 ports by error rate",
        "Link utilisation, top 10 (% of capacity)",
        "XmitWait (congestion)",
        "LinkDowned increases",
        "Host/rail grid",
        "Modules with findings",
        "Received light, lowest 10 lanes (dBm)",
    ] {
        assert!(titles.iter().any(|t| t == wanted), "no panel {wanted}");
    }
    let grid = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"] == "Host/rail grid")
        .unwrap();
    let description = grid["description"].as_str().unwrap();
    assert!(
        description.contains("stays empty on a fabric whose HCAs name no rail"),
        "{description}"
    );
    let expr = grid["targets"][0]["expr"].as_str().unwrap();
    let grouping = promql_refs(expr).grouping;
    assert!(grouping.contains(&"host".to_string()) && grouping.contains(&"rail".to_string()));
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = repo_root().join("examples/prometheus");
    let check = Command::new("promtool")
        .args(["check", "rules", "ibscope-alerts.yml"])
        .current_dir(&dir)
        .output()
        .expect("promtool (Debian package prometheus)");
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let rules = std::fs::read_to_string(repo_root().join(RULES)).unwrap();
    let alerts: Vec<String> = rule_queries(&rules).into_iter().map(|(a, _)| a).collect();
    assert!(
        said.contains(&format!("SUCCESS: {} rules found", alerts.len())),
        "{said}"
    );

    let test = Command::new("promtool")
        .args(["test", "rules", "ibscope-alerts.test.yml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    // Every alert has a unit test in which it fires.
    let tests = std::fs::read_to_string(repo_root().join(RULE_TESTS)).unwrap();
    for alert in &alerts {
        let fires = tests
            .split("alertname: ")
            .skip(1)
            .any(|case| case.starts_with(&format!("{alert}\n")) && case.contains("exp_labels:"));
        assert!(fires, "no unit test in which {alert} fires");
    }
    for wanted in [
        "IbscopeExporterDown",
        "IbscopeSweepStale",
        "IbscopeFabricDown",
        "IbscopeNoMasterSM",
        "IbscopeLinkDegraded",
        "IbscopePortErrorsRising",
        "IbscopeSymbolErrorRatioHigh",
        "IbscopeLinkFlapping",
        "IbscopeCableLightLow",
        "IbscopeCableSignalLost",
    ] {
        assert!(alerts.iter().any(|a| a == wanted), "no alert {wanted}");
    }
}

/// `ibscope serve ARGS` on `sim` with stderr in `log`, a config of its own (IBSCOPE_ETC and
/// IBSCOPE_CONFIG as given), until dropped.
fn start_serve(sim: &Sim, log: &Path, args: &[&str], config: Option<&Path>) -> KillOnDrop {
    let mut cmd = sim.command(ibscope_bin());
    cmd.arg("serve")
        .args(args)
        .env("IBSCOPE_ETC", log.parent().unwrap().join("etc"))
        .env(
            "IBSCOPE_CONFIG",
            config.map(|p| p.as_os_str()).unwrap_or_default(),
        )
        .env_remove("IBSCOPE_NODE_NAME_MAP")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    KillOnDrop::spawn(cmd, "ibscope serve")
}

#[test]
fn dashboard_and_alert_queries_run_against_a_real_scrape() {
    let sim = sim("net");
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("Hca1", 1, "PortXmitDiscards", 42).unwrap();
    sim.set_counter("Switch1", 3, "LinkDownedCounter", 2)
        .unwrap();
    let scratch = temp_dir();
    let port = free_port();
    let log = scratch.path().join("serve.log");
    let listen = format!("127.0.0.1:{port}");
    let mut serve = start_serve(&sim, &log, &["--listen", &listen, "--interval", "1"], None);
    wait_healthy(&mut serve, port, &log);
    let (_, page) = http_get(port, "/metrics").unwrap();
    let mut page = families(&page);
    assert!(page.contains_key("ibscope_port_data_rate_gbps"), "{page:?}");
    // The simulator has no module to read: the cable families come from a second
    // exporter, on the recorded fabric with `--cables`, scraped by the same Prometheus.
    let cables_config = crate::cables::recorded_modules(scratch.path());
    let cables_log = scratch.path().join("serve-cables.log");
    let cables_port = free_port();
    let mut cables_serve =
        crate::cables::start_serve_cables(&cables_config, &cables_log, cables_port);
    wait_healthy(&mut cables_serve, cables_port, &cables_log);
    let (_, cables_page) = http_get(cables_port, "/metrics").unwrap();
    for (family, labels) in families(&cables_page) {
        page.entry(family).or_default().extend(labels);
    }

    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join(DASHBOARD)).unwrap())
            .unwrap();
    let rules = std::fs::read_to_string(repo_root().join(RULES)).unwrap();
    let mut queries: Vec<(String, String)> = dashboard_queries(&dash)
        .into_iter()
        .map(|(title, e)| {
            (
                format!("panel {title:?}"),
                grafana_substitute(&e, "ibscope"),
            )
        })
        .collect();
    // The job variable's own query.
    let job_var = dash["templating"]["list"][1]["query"]["query"]
        .as_str()
        .unwrap();
    assert_eq!(job_var, "label_values(ibscope_fabric_nodes, job)");
    assert!(page.contains_key("ibscope_fabric_nodes"));
    queries.extend(
        rule_queries(&rules)
            .into_iter()
            .map(|(alert, e)| (format!("alert {alert}"), e)),
    );
    assert!(queries.len() > 30, "{}", queries.len());

    let mut wrong = Vec::new();
    for (what, expr) in &queries {
        assert!(!expr.contains('$'), "{what}: a variable left in {expr}");
        wrong.extend(check_refs(what, expr, &page));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // A real Prometheus scrapes the exporter (job "ibscope", as the rules expect) and runs
    // every query: one that does not parse gets 400 bad_data.
    let mut prom = Prometheus::start(scratch.path(), "ibscope", &[port, cables_port]);
    let rate_ready = "rate(ibscope_port_symbol_error_total{job=\"ibscope\"}[1m])";
    wait_for(Duration::from_secs(30), "two scrapes in Prometheus", || {
        let (code, doc) = prom.try_query(rate_ready)?;
        let result = doc["data"]["result"].as_array()?;
        (code == 200 && !result.is_empty()).then_some(())
    });
    let mut failed = Vec::new();
    for (what, expr) in &queries {
        let (code, doc) = prom.query(expr);
        if code != 200 || doc["status"] != "success" {
            failed.push(format!("{what}: HTTP {code} {doc}\n  {expr}"));
            continue;
        }
        // A query that filters (a comparison), groups by the host/rail labels or is
        // `absent()` may be empty on a healthy fabric; every other one has data.
        let flat = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        let filters = [" > ", " == ", " >= ", "absent("]
            .iter()
            .any(|op| flat.contains(op));
        let by_host = HOST_LABELS
            .iter()
            .any(|l| promql_refs(expr).grouping.iter().any(|g| g == l));
        let empty = doc["data"]["result"]
            .as_array()
            .is_some_and(|r| r.is_empty());
        if empty && !filters && !by_host {
            failed.push(format!("{what}: no data\n  {expr}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));

    // The host/rail grid stays empty (not one blank cell) on a fabric without rails.
    if !page.values().any(|labels| labels.contains("rail")) {
        let (_, expr) = queries
            .iter()
            .find(|(what, _)| what == "panel \"Host/rail grid\"")
            .unwrap();
        let (_, doc) = prom.query(expr);
        assert_eq!(doc["data"]["result"], serde_json::json!([]), "{expr}");
    }

    // Data the panels and alerts are about, as Prometheus sees it.
    let (_, doc) = prom.query(
        "sum by (kind) (ibscope_findings{job=\"ibscope\", kind=\"counter-above-threshold\"})",
    );
    // Symbol errors, discards and LinkDowned: every error counter's threshold is 0.
    assert_eq!(doc["data"]["result"][0]["value"][1], "3", "{doc}");
    let (_, doc) = prom.query(&grafana_substitute(
        "ibscope_port_link_downed_total{job=~\"$job\", node_name=\"Switch1\", port=\"3\"}",
        "ibscope",
    ));
    assert_eq!(doc["data"]["result"][0]["value"][1], "2", "{doc}");
    drop(prom);
    drop(cables_serve);
    drop(serve);
}

#[test]
fn serve_takes_its_defaults_from_the_config_file_and_reports_a_missing_sm() {
    let sim = sim("net");
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("Hca1", 1, "PortXmitDiscards", 42).unwrap();
    let scratch = temp_dir();
    let port = free_port();
    // 17 symbol errors are under this file's threshold; the 42 discards are not.
    let thresholds = scratch.path().join("thresholds");
    std::fs::write(&thresholds, "SymbolErrorCounter=100\n").unwrap();
    let config = scratch.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "thresholds = \"thresholds\"\ntimeout-ms = 100\nretries = 1\n\
             [serve]\nlisten = \"127.0.0.1:{port}\"\ninterval = 0.5\ncounters = \"errors\"\n"
        ),
    )
    .unwrap();
    let log = scratch.path().join("serve.log");
    let mut serve = start_serve(&sim, &log, &[], Some(&config));
    wait_healthy(&mut serve, port, &log);
    let (_, page) = http_get(port, "/metrics").unwrap();
    // --counters errors from the file: no traffic families.
    assert!(page.contains("ibscope_port_xmit_discards_total{"));
    assert!(
        !page.contains("ibscope_port_xmit_data_bytes_total"),
        "data families present"
    );
    let finding =
        |page: &str, kind: &str| sample_value(page, "ibscope_findings", &[("kind", kind)]);
    assert_eq!(
        finding(&page, "counter-above-threshold"),
        Some(1.0),
        "only the discards"
    );
    assert_eq!(finding(&page, "no-master-sm"), Some(0.0));
    // `check` agrees when it runs with the same file.
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(["check", "--json"]).env("IBSCOPE_CONFIG", &config);
    let out = run_with_timeout(cmd, client_timeout());
    let report: Value = serde_json::from_str(&assert_exit(&out, 1)).unwrap();
    let counted = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "counter-above-threshold")
        .count();
    assert_eq!(counted, 1, "{report:#}");

    // OpenSM dies: the exporter's SM check finds no master.
    let sm = sim.opensm_pid().expect("OpenSM runs");
    // SAFETY: a plain kill(2) of the simulator's own OpenSM child.
    unsafe { libc::kill(sm as i32, libc::SIGKILL) };
    wait_for(Duration::from_secs(20), "no-master-sm on the page", || {
        serve.assert_running(&log);
        let (_, page) = http_get(port, "/metrics").ok()?;
        (finding(&page, "no-master-sm") == Some(1.0)).then_some(())
    });
    drop(serve);
}

/// `line` (a sample line of the exposition) without its host and rail labels.
fn without_host_rail(line: &str) -> String {
    let mut out = line.to_string();
    for label in [",host=\"", ",rail=\""] {
        if let Some(start) = out.find(label) {
            let value_end = out[start + label.len()..].find('"').unwrap();
            out.replace_range(start..start + label.len() + value_end + 1, "");
        }
    }
    out
}

/// On a GPU fabric (HCAs named as rdma-ndd names them, "gpu-0003 mlx5_2") every series of
/// an HCA port carries host and rail, they add no series (the page without them has as
/// many distinct series), and the dashboard's Host/rail grid fills in a real Prometheus:
/// one cell per server and rail, "degraded" (1) on the one slow rail, 0 elsewhere.
#[test]
fn host_rail_labels_fill_the_grid_on_a_rail_fabric() {
    let scratch = temp_dir();
    let topo = sim_gen(
        scratch.path(),
        "rails.topo",
        &[
            "rails",
            "--hosts",
            "4",
            "--rails",
            "4",
            "--hosts-per-leaf",
            "2",
            "--radix",
            "8",
            "--degrade",
            "G0003R2:1:1xHDR",
        ],
    );
    let sim = sim(&topo);
    let port = free_port();
    let log = scratch.path().join("serve.log");
    let listen = format!("127.0.0.1:{port}");
    let mut serve = start_serve(&sim, &log, &["--listen", &listen, "--interval", "1"], None);
    wait_healthy(&mut serve, port, &log);
    let (_, page) = http_get(port, "/metrics").unwrap();
    let series: Vec<&str> = page
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let ca_series: Vec<&&str> = series
        .iter()
        .filter(|l| l.contains("kind=\"ca\"") && l.contains(",port=\""))
        .collect();
    assert!(ca_series.len() > 16 * 10, "{}", ca_series.len());
    for l in &ca_series {
        assert!(
            l.contains(",host=\"gpu-000") && l.contains(",rail=\""),
            "an HCA port series without host and rail: {l}"
        );
    }
    assert!(
        page.contains(
            "node_name=\"gpu-0003 mlx5_2\",kind=\"ca\",port=\"1\",host=\"gpu-0003\",rail=\"2\""
        ),
        "{page}"
    );
    // The slow rail is a finding of check's, counted on the page as check counts it.
    for (kind, n) in [
        ("rail-slow", 1.0),
        ("degraded-link", 1.0),
        ("rail-down", 0.0),
    ] {
        assert_eq!(
            sample_value(&page, "ibscope_findings", &[("kind", kind)]).unwrap_or(0.0),
            n,
            "{kind}"
        );
    }
    // Labels, not series: without them the series stay distinct.
    let keys = |lines: &[&str]| -> BTreeSet<String> {
        lines
            .iter()
            .map(|l| without_host_rail(l.rsplit_once(' ').unwrap().0))
            .collect()
    };
    assert_eq!(keys(&series).len(), series.len());

    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join(DASHBOARD)).unwrap())
            .unwrap();
    let (_, expr) = dashboard_queries(&dash)
        .into_iter()
        .find(|(title, _)| title == "Host/rail grid")
        .unwrap();
    let expr = grafana_substitute(&expr, "ibscope");
    let fam = families(&page);
    assert_eq!(
        check_refs("Host/rail grid", &expr, &fam),
        Vec::<String>::new()
    );
    let mut prom = Prometheus::start(scratch.path(), "ibscope", &[port]);
    let cells = wait_for(Duration::from_secs(30), "the host/rail grid", || {
        let (code, doc) = prom.try_query(&expr)?;
        let result = doc["data"]["result"].as_array()?.clone();
        (code == 200 && result.len() == 16).then_some(result)
    });
    let mut grid = BTreeMap::new();
    for c in &cells {
        let host = c["metric"]["host"].as_str().unwrap().to_string();
        let rail = c["metric"]["rail"].as_str().unwrap().to_string();
        grid.insert((host, rail), c["value"][1].as_str().unwrap().to_string());
    }
    for h in 1..=4 {
        for r in 0..4 {
            let want = if (h, r) == (3, 2) { "1" } else { "0" };
            assert_eq!(
                grid.get(&(format!("gpu-{h:04}"), r.to_string()))
                    .map(String::as_str),
                Some(want),
                "gpu-{h:04} rail {r}: {cells:#?}"
            );
        }
    }
    drop(prom);
    drop(serve);
}
