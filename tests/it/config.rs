//! Defaults where operators keep them: the config files, the environment and the files
//! infiniband-diags' users already have (node-name map, error thresholds), layered under
//! the flags; `config show` says where each value came from. Every test has its own /etc
//! (IBSCOPE_ETC) and home, so nothing depends on this machine's files.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

/// A private /etc and home directory.
struct Roots {
    dir: tempfile::TempDir,
}

impl Roots {
    fn new() -> Roots {
        let r = Roots { dir: temp_dir() };
        std::fs::create_dir_all(r.etc()).unwrap();
        std::fs::create_dir_all(r.home().join(".config")).unwrap();
        r
    }
    fn etc(&self) -> PathBuf {
        self.dir.path().join("etc")
    }
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    /// Write `text` to `rel` under the private /etc; returns its path.
    fn etc_file(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.etc().join(rel), text)
    }
    fn user_config(&self, text: &str) -> PathBuf {
        write(&self.home().join(".config/ibscope/config.toml"), text)
    }
    /// The environment of a run: these roots, nothing inherited that names a config.
    fn apply(&self, cmd: &mut Command, envs: &[(&str, &str)]) {
        cmd.env("IBSCOPE_ETC", self.etc())
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("IBSCOPE_CONFIG")
            .env_remove("IBSCOPE_NODE_NAME_MAP");
        for (k, v) in envs {
            cmd.env(k, v);
        }
    }
    /// `ibscope ARGS` without a fabric.
    fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(ibscope_bin());
        cmd.args(args)
            .env_remove("LD_PRELOAD")
            .env_remove("IBSIM_SOCKNAME");
        self.apply(&mut cmd, envs);
        run_with_timeout(cmd, client_timeout())
    }
    /// `ibscope config show --json` (after the global `flags`), parsed.
    fn show(&self, flags: &[&str], envs: &[(&str, &str)]) -> Value {
        let mut args = flags.to_vec();
        args.extend(["config", "show", "--json"]);
        serde_json::from_str(&assert_success(&self.run(&args, envs))).unwrap()
    }
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// (value, source, from) of one setting.
fn setting(doc: &Value, key: &str) -> (Value, String, Option<String>) {
    let s = &doc["settings"][key];
    assert!(s.is_object(), "no setting {key}: {doc}");
    (
        s["value"].clone(),
        s["source"].as_str().unwrap().to_string(),
        s["from"].as_str().map(str::to_string),
    )
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn nothing_configured_means_the_built_in_defaults() {
    let r = Roots::new();
    let doc = r.show(&[], &[]);
    for (key, value) in [
        ("ca", Value::Null),
        ("port", Value::Null),
        ("timeout-ms", 200.into()),
        ("retries", 3.into()),
        ("max-outstanding", 128.into()),
        ("node-name-map", Value::Null),
        ("thresholds", Value::Null),
        ("serve.listen", "127.0.0.1:9315".into()),
        ("serve.counters", "all".into()),
        ("serve.active-only", false.into()),
        ("serve.rediscover-every", 30.into()),
    ] {
        assert_eq!(setting(&doc, key), (value, "default".into(), None), "{key}");
    }
    let files: Vec<(String, bool)> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["read"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            (shown(&r.etc().join("ibscope/config.toml")), false),
            (shown(&r.home().join(".config/ibscope/config.toml")), false)
        ]
    );
    // The text form names the same sources.
    let text = assert_success(&r.run(&["config", "show"], &[]));
    assert!(text.contains("not present"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("timeout-ms ") && l.ends_with("default")),
        "{text}"
    );
}

#[test]
fn files_layer_under_the_environment_and_flags() {
    let r = Roots::new();
    let system = r.etc_file(
        "ibscope/config.toml",
        "ca = \"mlx5_2\"\nretries = 5\ntimeout-ms = 300\nnode-name-map = \"names.map\"\n\
         [serve]\ncounters = \"errors\"\nlisten = \"127.0.0.1:9400\"\nactive-only = true\n",
    );
    let user = r.user_config("retries = 7\nmax-outstanding = 64\n[serve]\ninterval = 2.5\n");
    let doc = r.show(&["--timeout-ms", "500"], &[]);
    let file = |p: &Path| Some(shown(p));
    assert_eq!(
        setting(&doc, "ca"),
        ("mlx5_2".into(), "file".into(), file(&system))
    );
    // The user's file wins over the machine's, key by key; a flag wins over both.
    assert_eq!(
        setting(&doc, "retries"),
        (7.into(), "file".into(), file(&user))
    );
    assert_eq!(
        setting(&doc, "max-outstanding"),
        (64.into(), "file".into(), file(&user))
    );
    assert_eq!(
        setting(&doc, "timeout-ms"),
        (500.into(), "flag".into(), Some("--timeout-ms".into()))
    );
    // A relative path is relative to the file that names it.
    let map = r.etc().join("ibscope/names.map");
    assert_eq!(
        setting(&doc, "node-name-map"),
        (shown(&map).into(), "file".into(), file(&system))
    );
    assert_eq!(
        setting(&doc, "serve.counters"),
        ("errors".into(), "file".into(), file(&system))
    );
    assert_eq!(
        setting(&doc, "serve.interval"),
        (2.5.into(), "file".into(), file(&user))
    );
    assert_eq!(
        setting(&doc, "serve.active-only"),
        (true.into(), "file".into(), file(&system))
    );
    assert_eq!(setting(&doc, "serve.switches-only").1, "default");
    // A global flag after the command counts as given too.
    let after = r.run(
        &["config", "show", "--json", "--retries", "1", "-C", "mlx5_0"],
        &[],
    );
    let after: Value = serde_json::from_str(&assert_success(&after)).unwrap();
    assert_eq!(
        setting(&after, "retries"),
        (1.into(), "flag".into(), Some("--retries".into()))
    );
    assert_eq!(
        setting(&after, "ca"),
        ("mlx5_0".into(), "flag".into(), Some("--ca".into()))
    );

    // The environment beats the files for the node-name map; the flag beats both.
    let env_map = shown(&r.dir.path().join("env.map"));
    let doc = r.show(&[], &[("IBSCOPE_NODE_NAME_MAP", &env_map)]);
    assert_eq!(
        setting(&doc, "node-name-map"),
        (
            env_map.clone().into(),
            "env".into(),
            Some("$IBSCOPE_NODE_NAME_MAP".into())
        )
    );
    let doc = r.show(
        &["--node-name-map", "/x.map"],
        &[("IBSCOPE_NODE_NAME_MAP", &env_map)],
    );
    assert_eq!(setting(&doc, "node-name-map").0, "/x.map");
    let doc = r.show(&[], &[("IBSCOPE_NODE_NAME_MAP", "")]);
    assert_eq!(
        setting(&doc, "node-name-map").0,
        Value::Null,
        "empty: no map"
    );

    // IBSCOPE_CONFIG: that one file instead of both.
    let lab = write(&r.dir.path().join("lab.toml"), "retries = 9\n");
    let doc = r.show(&[], &[("IBSCOPE_CONFIG", &shown(&lab))]);
    assert_eq!(
        setting(&doc, "retries"),
        (9.into(), "file".into(), file(&lab))
    );
    assert_eq!(setting(&doc, "ca").1, "default");
    assert_eq!(doc["files"].as_array().unwrap().len(), 1);
    let doc = r.show(&[], &[("IBSCOPE_CONFIG", "")]);
    assert_eq!(setting(&doc, "retries").1, "default");
}

#[test]
fn a_bad_config_file_is_an_error_that_names_it() {
    let r = Roots::new();
    let cases: [(&str, &str); 4] = [
        ("retrys = 5\n", "retrys"),
        ("retries = \"many\"\n", "retries"),
        (
            "[serve]\ncounters = \"some\"\n",
            "must be all, errors or data",
        ),
        ("max-outstanding = 0\n", "must be 1 to 256"),
    ];
    for (text, says) in cases {
        let path = r.etc_file("ibscope/config.toml", text);
        let out = r.run(&["config", "show"], &[]);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains(&shown(&path)) && err.contains(says),
            "{text}: {err}"
        );
        // Every command that reads the settings refuses too...
        let out = r.run(&["--topology", "/nonexistent", "links"], &[]);
        assert!(stderr(&out).contains(&shown(&path)), "{}", stderr(&out));
        // ...but not the ones that only describe the command line.
        assert_success(&r.run(&["completions", "bash"], &[]));
    }
    std::fs::remove_file(r.etc().join("ibscope/config.toml")).unwrap();
    let out = r.run(
        &["config", "show"],
        &[("IBSCOPE_CONFIG", "/nonexistent/ibscope.toml")],
    );
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("/nonexistent/ibscope.toml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn infiniband_diags_node_name_map_is_the_default() {
    let r = Roots::new();
    let topo = fabric("net");
    let topo = shown(&topo);
    let links = |flags: &[&str], envs: &[(&str, &str)]| {
        let mut args = vec!["--topology", &topo];
        args.extend_from_slice(flags);
        args.push("links");
        assert_success(&r.run(&args, envs))
    };
    assert!(links(&[], &[]).contains("\"Switch1\""));
    // Present at /etc/rdma/ib-node-name-map: used, as infiniband-diags uses it.
    let default = r.etc_file("rdma/ib-node-name-map", "0x0000000000200000 \"spine-a\"\n");
    assert!(links(&[], &[]).contains("\"spine-a\""));
    let doc = r.show(&[], &[]);
    assert_eq!(
        setting(&doc, "node-name-map"),
        (shown(&default).into(), "default".into(), None)
    );
    // $IBSCOPE_NODE_NAME_MAP overrides it, --node-name-map overrides both.
    let env_map = write(
        &r.dir.path().join("env.map"),
        "0x0000000000200000 \"spine-env\"\n",
    );
    let flag_map = write(
        &r.dir.path().join("flag.map"),
        "0x0000000000200000 \"spine-flag\"\n",
    );
    let env = [("IBSCOPE_NODE_NAME_MAP", shown(&env_map))];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert!(links(&[], &env).contains("\"spine-env\""));
    let flag = shown(&flag_map);
    assert!(links(&["--node-name-map", &flag], &env).contains("\"spine-flag\""));
    assert!(links(&[], &[("IBSCOPE_NODE_NAME_MAP", "")]).contains("\"Switch1\""));
}

/// The injected SymbolErrorCounter of Switch1 port 1, and the check findings about it.
fn symbol_findings(report: &Value) -> usize {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["kind"] == "counter-above-threshold"
                && f["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("SymbolErrorCounter"))
        })
        .count()
}

#[test]
fn check_takes_the_thresholds_ibqueryerrors_reads() {
    let shipped = std::fs::read_to_string(repo_root().join("tests/data/error_thresholds")).unwrap();
    // rdma-core's file sets nothing (every line is a comment): the defaults hold.
    assert!(shipped
        .lines()
        .all(|l| l.trim().is_empty() || l.starts_with('#')));
    assert!(shipped.contains("#SymbolErrorCounter=10"));

    let sim = sim("net");
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 5)
        .unwrap();
    let r = Roots::new();
    let check = |flags: &[&str]| -> Value {
        let mut cmd = sim.command(ibscope_bin());
        cmd.args(["check", "--json"]).args(flags);
        r.apply(&mut cmd, &[]);
        let out = run_with_timeout(cmd, client_timeout());
        let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let findings = !report["findings"].as_array().unwrap().is_empty();
        assert_exit(&out, i32::from(findings));
        report
    };
    // No file: every error counter at 0, the 5 symbol errors are a finding.
    assert_eq!(symbol_findings(&check(&[])), 1);
    // A file beside the node-name map is read when ibqueryerrors' own default is absent
    // (ibqueryerrors reads only IBDIAG_CONFIG_PATH, /etc/infiniband-diags, in rdma-core).
    let raised_rdma = shipped.replace("#SymbolErrorCounter=10", "SymbolErrorCounter=10");
    let beside = r.etc_file("rdma/error_thresholds", &raised_rdma);
    assert_eq!(
        setting(&r.show(&[], &[]), "thresholds").0,
        shown(&beside).as_str()
    );
    assert_eq!(symbol_findings(&check(&[])), 0);
    // The shipped file where ibqueryerrors looks for it: read, and the same result.
    let default = r.etc_file("infiniband-diags/error_thresholds", &shipped);
    assert_eq!(
        setting(&r.show(&[], &[]), "thresholds"),
        (shown(&default).into(), "default".into(), None)
    );
    assert_eq!(symbol_findings(&check(&[])), 1);
    // ibqueryerrors' file wins over the one beside the node-name map.
    // The operator uncomments a line: 5 is not above 10, no finding.
    let raised = shipped.replace("#SymbolErrorCounter=10", "SymbolErrorCounter=10");
    r.etc_file("infiniband-diags/error_thresholds", &raised);
    assert_eq!(symbol_findings(&check(&[])), 0);
    // check --thresholds wins over the default file.
    let strict = write(&r.dir.path().join("strict"), "SymbolErrorCounter=4\n");
    assert_eq!(
        symbol_findings(&check(&["--thresholds", &shown(&strict)])),
        1
    );
    // A config file's `thresholds` wins over the default file.
    r.etc_file(
        "ibscope/config.toml",
        &format!("thresholds = {:?}\n", shown(&strict)),
    );
    assert_eq!(symbol_findings(&check(&[])), 1);
}

#[test]
fn the_example_config_lists_real_keys_with_their_defaults() {
    let r = Roots::new();
    let example = repo_root().join("examples/config.toml");
    let text = std::fs::read_to_string(&example).unwrap();
    // As shipped every key is commented out: nothing changes.
    let doc = r.show(&[], &[("IBSCOPE_CONFIG", &shown(&example))]);
    assert!(doc["settings"]
        .as_object()
        .unwrap()
        .values()
        .all(|s| s["source"] == "default"));
    // Uncommented, every key is one ibscope knows, and each value shown is the default.
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if rest.contains(" = ") => rest.split("  #").next().unwrap().to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let file = write(&r.dir.path().join("all.toml"), &uncommented);
    let doc = r.show(&[], &[("IBSCOPE_CONFIG", &shown(&file))]);
    let settings = doc["settings"].as_object().unwrap();
    for (key, s) in settings {
        assert_eq!(s["source"], "file", "{key} is not in examples/config.toml");
    }
    let defaults = r.show(&[], &[("IBSCOPE_CONFIG", "")]);
    for key in [
        "timeout-ms",
        "retries",
        "max-outstanding",
        "serve.listen",
        "serve.interval",
        "serve.counters",
        "serve.rediscover-every",
    ] {
        assert_eq!(
            settings[key]["value"], defaults["settings"][key]["value"],
            "{key}: the example does not show the default"
        );
    }
}
