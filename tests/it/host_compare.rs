//! `ibscope host compare` over documents `ibscope host --json` wrote for a fixture tree
//! (tests/data/sysfs through IBSCOPE_SYSFS_ROOT), copied into a fleet with planted outliers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn ibscope() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibscope"));
    cmd.env_remove("IBSCOPE_SYSFS_ROOT");
    cmd
}

/// The `host --json` document of the dgx-h100 fixture.
fn dgx_document() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sysfs/dgx-h100");
    let out = ibscope()
        .args(["host", "--json"])
        .env("IBSCOPE_SYSFS_ROOT", &root)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).expect("host --json is JSON")
}

/// Sixteen servers as JSON lines; gpu-0007's first HCA runs other firmware.
fn fleet_with_outlier() -> String {
    let base = dgx_document();
    assert!(
        base["devices"][0]["fw_ver"].is_string(),
        "fixture has firmware"
    );
    (1..=16)
        .map(|i| {
            let mut doc = base.clone();
            doc["hostname"] = Value::from(format!("gpu-{i:04}"));
            if i == 7 {
                doc["devices"][0]["fw_ver"] = Value::from("28.41.9999");
            }
            format!("{doc}\n")
        })
        .collect()
}

fn compare_stdin(args: &[&str], input: &str) -> Output {
    let mut child = ibscope()
        .args(["host", "compare"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn names_the_planted_firmware_outlier_and_exits_1() {
    let out = compare_stdin(&["-"], &fleet_with_outlier());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let device = dgx_document()["devices"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].starts_with(&format!(
            "gpu-0007: {device} firmware 28.41.9999 (majority "
        )),
        "{text}"
    );
    assert!(lines[0].ends_with(" on 15 of 16)"), "{text}");

    let out = compare_stdin(&["--json", "-"], &fleet_with_outlier());
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let report =
        crate::common::schema::assert_valid("host-compare", "host compare --json", &text, false);
    assert_eq!(report[0]["consistent"], false);
    assert_eq!(report[0]["outliers"][0]["server"], "gpu-0007");
    assert_eq!(report[0]["outliers"][0]["value"], "28.41.9999");
}

#[test]
fn json_output_of_a_consistent_fleet_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dgx_document();
    let mut files: Vec<PathBuf> = Vec::new();
    for i in 0..3 {
        let path = dir.path().join(format!("h{i}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        files.push(path);
    }
    let out = ibscope()
        .args(["host", "compare", "--json"])
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    crate::common::schema::assert_valid("host-compare", "host compare --json", &text, false);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["servers"], 3);
    assert_eq!(report["consistent"], true);
    assert_eq!(report["outliers"], Value::Array(vec![]));
}

#[test]
fn a_truncated_document_is_a_clear_error_naming_file_and_index() {
    let fleet = fleet_with_outlier();
    let truncated = &fleet[..fleet.len() - 40];
    let out = compare_stdin(&["-"], truncated);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-: document 16: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn host_check_firmware_manifest_flags_hcas_off_the_manifest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sysfs/dgx-h100");
    let doc = dgx_document();
    let model = doc["devices"][0]["hca_type"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("firmware.txt");
    let run = |text: &str| {
        std::fs::write(&manifest, text).unwrap();
        let out = ibscope()
            .args(["host", "--check", "--json", "--firmware"])
            .arg(&manifest)
            .env("IBSCOPE_SYSFS_ROOT", &root)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let flagged = report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["kind"] == "firmware-not-expected")
            .count();
        (out, flagged)
    };
    let (_, flagged) = run(&format!("{model}=99.99.9999\n"));
    let with_model = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["hca_type"] == model.as_str())
        .count();
    assert!(with_model > 0);
    assert_eq!(flagged, with_model);
    let fw = doc["devices"][0]["fw_ver"].as_str().unwrap();
    let (_, flagged) = run(&format!("# as installed\n{model}={fw}\n"));
    assert_eq!(flagged, 0);
    let (out, _) = run("not a manifest line\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(": line 1: expected KEY=VERSION"));
}
