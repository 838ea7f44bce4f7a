//! Hostile NodeDescriptions (terminal escapes, BEL, quotes, commas, backslashes, newlines)
//! through every output format, live (ibsim serves the description) and offline (a JSON
//! snapshot, which can carry any string): human formats never pass ESC or BEL through,
//! machine formats quote per their grammar and round-trip the string exactly.

use crate::common;

use common::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ibscope_topo::{ibnd, routing, Fabric};
use ibscope_tui::{input, render, AppState, Sweep};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// What ibsim can carry: its topology parser ends a description at the next `"`, so no
/// double quote; everything else hostile is there (OSC title set, BEL, clear screen,
/// comma for CSV, backslash for Prometheus/DOT).
const SIM_DESC: &str = "evil\x1b]0;pwned\x07\x1b[2J q'x,y\\z";
/// What a JSON snapshot (or a real fabric) can carry on top: quotes and a newline.
const FULL_DESC: &str = "evil\x1b]0;pwned\x07\x1b[2J\"quote\",comma\\back\nSwitch 8 \"x\"";

/// H2 first: clients attach at the first node (an HCA, as on a real host).
fn sim_topology() -> String {
    format!(
        "Hca 1 \"H2\"\n[1] \"S1\"[2]\n\n\
         Switch 4 \"S1\"\n[1] \"H1\"[1]\n[2] \"H2\"[1]\n\n\
         Hca 1 \"H1\" # \"{SIM_DESC}\"\n[1] \"S1\"[1]\n"
    )
}

/// Offline fixture with LIDs; H1's description is replaced by FULL_DESC in code.
const OFFLINE_TOPOLOGY: &str = "\
Switch 4 \"S1\" # \"S1\" base port 0 lid 1 lmc 0
[1] \"H1\"[1] # \"H1\" lid 2 4xHDR
[2] \"H2\"[1] # \"H2\" lid 3 4xHDR

Hca 1 \"H1\" # \"H1\"
[1] \"S1\"[1] # lid 2 lmc 0 \"S1\" lid 1 4xHDR

Hca 1 \"H2\" # \"H2\"
[1] \"S1\"[2] # lid 3 lmc 0 \"S1\" lid 1 4xHDR
";

#[track_caller]
fn assert_no_controls(what: &str, bytes: &[u8]) {
    for (name, b) in [("ESC", 0x1bu8), ("BEL", 0x07)] {
        if let Some(at) = bytes.iter().position(|&c| c == b) {
            let from = at.saturating_sub(60);
            panic!(
                "{what}: raw {name} at byte {at}: {:?}",
                String::from_utf8_lossy(&bytes[from..(at + 20).min(bytes.len())])
            );
        }
    }
}

#[track_caller]
fn assert_clean_run(what: &str, out: &Output) {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "{what} panicked:\n{err}");
    assert_no_controls(&format!("{what} (stderr)"), &out.stderr);
}

/// A clean run (see [`assert_clean_run`]) that exited 0 (ok) or 1 (findings).
#[track_caller]
fn assert_ran(what: &str, out: &Output) {
    assert_clean_run(what, out);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{what}: {:?}\n{}",
        out.status,
        stderr(out)
    );
}

/// Every JSON string value, recursively.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// JSON parses; some string is exactly `desc` (when `must_appear`), and any string that
/// mentions it carries it intact.
#[track_caller]
fn assert_json_round_trip(what: &str, text: &str, desc: &str, must_appear: bool) {
    let v: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON: {e}\n{text}"));
    let mut all = Vec::new();
    strings(&v, &mut all);
    let mentions: Vec<&String> = all.iter().filter(|s| s.contains("evil")).collect();
    for s in &mentions {
        assert!(s.contains(desc), "{what}: mangled description {s:?}");
    }
    if must_appear {
        assert!(
            all.iter().any(|s| s == desc),
            "{what}: description not found verbatim"
        );
    }
}

/// RFC 4180 reader: fields, quoted fields with `""` for a quote, CRLF or LF line ends.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut at_field_start = true;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    quoted = false;
                }
            } else {
                field.push(c);
            }
            continue;
        }
        match c {
            '"' if at_field_start => {
                quoted = true;
                at_field_start = false;
            }
            '"' => panic!("bare quote inside an unquoted CSV field: {field:?}"),
            ',' => {
                row.push(std::mem::take(&mut field));
                at_field_start = true;
            }
            '\r' => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                at_field_start = true;
            }
            _ => {
                field.push(c);
                at_field_start = false;
            }
        }
    }
    assert!(!quoted, "unterminated quoted CSV field");
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

#[track_caller]
fn check_csv(text: &str, desc: &str) {
    let rows = parse_csv(text);
    let header = &rows[0];
    let node_col = header
        .iter()
        .position(|h| h == "node")
        .expect("node column");
    for r in &rows[1..] {
        assert_eq!(
            r.len(),
            header.len(),
            "CSV row with a wrong field count: {r:?}"
        );
    }
    assert!(
        rows[1..].iter().any(|r| r[node_col] == desc),
        "CSV: description not round-tripped:\n{text}"
    );
}

/// Label values of the Prometheus text format, unescaped (`\\`, `\"`, `\n`).
fn prom_label_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(open) = line.find('{') else {
            continue;
        };
        let mut chars = line[open + 1..].chars();
        let mut in_value = false;
        let mut value = String::new();
        while let Some(c) = chars.next() {
            if !in_value {
                if c == '"' {
                    in_value = true;
                } else if c == '}' {
                    break;
                }
                continue;
            }
            match c {
                '\\' => match chars.next() {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => panic!("bad escape \\{other:?} in label value: {line}"),
                },
                '"' => {
                    out.push(std::mem::take(&mut value));
                    in_value = false;
                }
                _ => value.push(c),
            }
        }
        assert!(!in_value, "unterminated label value: {line}");
    }
    out
}

#[track_caller]
fn check_prom(text: &str, desc: &str) {
    let values = prom_label_values(text);
    assert!(
        values.iter().any(|v| v == desc),
        "Prometheus: description not round-tripped; values containing evil: {:?}",
        values
            .iter()
            .filter(|v| v.contains("evil"))
            .collect::<Vec<_>>()
    );
    let PromtoolReport { code, report } = promtool_check(text);
    // promtool exits 1 on a parse error and 3 on style lints alone. Parsing is what the
    // hostile label can break; the naming lints (e.g. "_counter_total") are reported by
    // the lint-only check below but are not about escaping.
    assert!(
        !report.contains("parsing error") && code != Some(1),
        "promtool cannot parse the exposition:\n{report}"
    );
    let lints: Vec<&str> = report
        .lines()
        .filter(|l| !l.contains("should not include type 'counter'"))
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(lints.is_empty(), "promtool check metrics:\n{report}");
}

#[track_caller]
fn check_dot(text: &str) {
    assert_no_controls("dot", text.as_bytes());
    let dir = temp_dir();
    let path = dir.path().join("fabric.dot");
    std::fs::write(&path, text).unwrap();
    let mut cmd = Command::new("dot");
    cmd.arg("-Tplain").arg(&path);
    let out = run_with_timeout(cmd, Duration::from_secs(20));
    assert!(
        out.status.success(),
        "dot -Tplain rejects the DOT output:\n{}\n{text}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("evil"),
        "the hostile node lost its label"
    );
}

/// The outputs every run (live or offline) is checked for; `run` runs ibscope with args.
fn check_all_formats(run: &dyn Fn(&[&str]) -> Output, desc: &str, live: bool, dst_guid: &str) {
    let human: &[&[&str]] = &[
        &["discover"],
        &["discover", "--format", "ibnetdiscover"],
        &["links"],
        &["check"],
        &["route", "trace", "H2", dst_guid],
        &["route", "check"],
    ];
    for args in human {
        let out = run(args);
        let what = format!("ibscope {}", args.join(" "));
        assert_ran(&what, &out);
        assert_no_controls(&what, &out.stdout);
    }
    // The ibnetdiscover text names the hostile node (made visible, not dropped).
    let text = stdout(&run(&["discover"]));
    assert!(text.contains("evil\\x1b]0;pwned\\x07"), "{text}");
    // So do the reports, made visible once: no second (Debug) escaping of the escapes.
    let text = stdout(&run(&["links"]));
    assert!(text.contains("\"evil\\x1b]0;pwned\\x07"), "{text}");

    let out = run(&["discover", "--format", "dot"]);
    assert_clean_run("discover dot", &out);
    check_dot(&assert_success(&out));

    let json: &[(&[&str], bool)] = &[
        (&["discover", "--format", "json"], true),
        (&["links", "--json"], false),
        (&["check", "--json"], false),
        (&["route", "--json", "trace", "H2", dst_guid], false),
    ];
    for (args, must_appear) in json {
        let out = run(args);
        let what = format!("ibscope {}", args.join(" "));
        assert_clean_run(&what, &out);
        assert_json_round_trip(&what, &stdout(&out), desc, *must_appear);
    }

    if live {
        for format in ["table", "json", "csv", "prom"] {
            let out = run(&["counters", "--format", format]);
            let what = format!("counters --format {format}");
            assert_ran(&what, &out);
            let text = stdout(&out);
            match format {
                "table" => assert_no_controls(&what, &out.stdout),
                "json" => assert_json_round_trip(&what, &text, desc, true),
                "csv" => check_csv(&text, desc),
                _ => check_prom(&text, desc),
            }
        }
    }
}

#[test]
fn hostile_description_live() {
    let dir = temp_dir();
    let topo = dir.path().join("hostile.topo");
    std::fs::write(&topo, sim_topology()).unwrap();
    let sim = sim_with(SimOptions::new(&topo));
    // ibsim must really serve the bytes (else this test proves nothing).
    let snapshot: Value = serde_json::from_str(&assert_success(&ibscope(
        &sim,
        &["discover", "--format", "json"],
    )))
    .unwrap();
    let h1 = snapshot["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["description"] == SIM_DESC)
        .expect("ibsim serves the hostile NodeDescription");
    let guid = format!("{:#018x}", json_guid(&h1["guid"]).unwrap());
    let run = |args: &[&str]| ibscope(&sim, args);
    check_all_formats(&run, SIM_DESC, true, &guid);

    // The live sample with the description ibsim cannot carry (quotes, newline) put in:
    // the Prometheus writer must escape those too.
    let text = stdout(&ibscope(&sim, &["counters", "--format", "json"]));
    let mut sample: ibscope_topo::counters::Sample = serde_json::from_str(&text).unwrap();
    let mut replaced = 0;
    for p in &mut sample.ports {
        if &*p.at.node.name == SIM_DESC {
            p.at.node.name = FULL_DESC.into();
            replaced += 1;
        }
    }
    assert!(replaced > 0, "no port named by the hostile description");
    check_prom(
        &ibscope_topo::export::prometheus::counters_page(&[("fabric", &sample)]),
        FULL_DESC,
    );
}

fn offline_fabric() -> Fabric {
    let mut f = ibnd::parse(OFFLINE_TOPOLOGY).unwrap();
    let id = f.nodes_by_description("H1")[0];
    f.node_mut(id).description = FULL_DESC.to_string();
    f.reindex();
    routing::compute_minhop_lfts(&mut f);
    f
}

fn write_snapshot(dir: &Path, f: &Fabric) -> String {
    let path = dir.join("hostile.json");
    std::fs::write(&path, serde_json::to_string(&f.to_file()).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn hostile_description_offline() {
    let f = offline_fabric();
    let guid = format!(
        "{:#018x}",
        f.node(f.nodes_by_description(FULL_DESC)[0]).guid
    );
    let dir = temp_dir();
    let snap = write_snapshot(dir.path(), &f);
    let run = |args: &[&str]| {
        let mut full = vec!["--topology", snap.as_str()];
        full.extend_from_slice(args);
        ibscope_plain(&full, &[])
    };
    check_all_formats(&run, FULL_DESC, false, &guid);

    // The ibnetdiscover text written from it loads back (the newline and quotes did not
    // inject a line or end the quoted id early).
    let text = assert_success(&run(&["discover"]));
    let back = ibnd::parse(&text).expect("ibscope's own ibnetdiscover output parses");
    assert_eq!(back.node_count(), f.node_count());
}

fn key(state: &mut AppState, c: char) {
    if let Some(a) = input::map_key(state, KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)) {
        input::apply(state, a);
    }
}

/// Every TUI view, drawn into a TestBackend: no cell carries ESC or BEL.
#[test]
fn hostile_description_tui() {
    let f = offline_fabric();
    let start = Instant::now();
    let mut state = AppState::new(None, Duration::from_secs(5), start);
    let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut snap = Sweep::from_fabric(f, at);
    snap.routes = ibscope_tui::source::check_routes(&snap.fabric);
    state.apply_sweep(snap, start);
    for view in ['1', '2', '3', '4', '5', '6', '7', '8', '9'] {
        key(&mut state, view);
        for (w, h) in [(80, 24), (200, 50)] {
            let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
            terminal.draw(|frame| render::draw(frame, &state)).unwrap();
            let buf = terminal.backend().buffer().clone();
            let mut all = String::new();
            for y in 0..h {
                for x in 0..w {
                    all.push_str(buf[(x, y)].symbol());
                }
            }
            assert_no_controls(&format!("TUI view {view} at {w}x{h}"), all.as_bytes());
        }
    }
}
