//! Installing and running as a service: the systemd unit is hardened as the issue asks,
//! and (as root, which CI is) the Debian package builds, installs with `dpkg -i`, and the
//! installed `ibscope` runs, with its man pages, completions and unit in place.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const UNIT: &str = "examples/systemd/ibscope-serve.service";
const UDEV_RULE: &str = "examples/udev/90-ibscope-umad.rules";

/// `Key=value` lines of the unit's [Service] section (a key may repeat).
fn service_settings(unit: &str) -> Vec<(String, String)> {
    let mut section = "";
    let mut out = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[Service]" && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.to_string(), v.to_string()));
            }
        }
    }
    out
}

#[test]
fn service_unit_runs_serve_unprivileged_read_only_and_restarts() {
    let unit = std::fs::read_to_string(repo_root().join(UNIT)).unwrap();
    let settings = service_settings(&unit);
    let get = |k: &str| -> Vec<&str> {
        settings
            .iter()
            .filter(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(get("ExecStart"), ["/usr/bin/ibscope serve"]);
    assert_eq!(get("Restart"), ["on-failure"]);
    // Not root: a dedicated dynamic user, no capabilities, in the group of the umad rule.
    assert_eq!(get("DynamicUser"), ["yes"]);
    assert!(get("User").is_empty(), "no fixed user, root least of all");
    assert_eq!(get("CapabilityBoundingSet"), [""]);
    assert_eq!(get("NoNewPrivileges"), ["yes"]);
    assert_eq!(get("SupplementaryGroups"), ["rdma"]);
    // Read-only file system.
    assert_eq!(get("ProtectSystem"), ["strict"]);
    assert_eq!(get("ProtectHome"), ["yes"]);
    assert_eq!(get("PrivateTmp"), ["yes"]);
    assert!(get("ReadWritePaths").is_empty());
    // Only the umad devices.
    assert_eq!(get("DevicePolicy"), ["closed"]);
    assert_eq!(get("DeviceAllow"), ["char-infiniband_mad rw"]);
    // The comment explains the group and quotes the rule that is shipped.
    let rule = std::fs::read_to_string(repo_root().join(UDEV_RULE)).unwrap();
    let rule_line = rule.lines().find(|l| !l.starts_with('#')).unwrap();
    assert!(rule_line.contains("GROUP=\"rdma\"") && rule_line.contains("infiniband_mad"));
    assert!(
        unit.contains(&format!("#   {rule_line}")),
        "the unit's comment quotes {rule_line}"
    );
}

/// An exclusive lock held while dropped: one package test at a time on this machine
/// (dpkg has one database, and another tree's test would install its own build).
struct MachineLock {
    /// The lock lives as long as the open file.
    _file: std::fs::File,
}

impl MachineLock {
    fn take() -> MachineLock {
        let dir = Path::new("/run/lock");
        let dir = if dir.is_dir() {
            dir.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let path = dir.join("ibscope-package-test.lock");
        let file = std::fs::File::create(&path).expect("creating the lock file");
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a file descriptor we own; released when the file closes.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock {}", path.display());
        MachineLock { _file: file }
    }
}

fn run(cmd: &str, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(cmd);
    c.args(args);
    run_with_timeout(c, Duration::from_secs(120))
}

fn installed() -> bool {
    let out = run("dpkg-query", &["-W", "-f=${Status}", "ibscope"]);
    stdout(&out).contains("install ok installed")
}

#[test]
fn debian_package_builds_installs_and_runs() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED: installing the Debian package needs root (dpkg -i); CI runs as root. \
             Build it without installing: scripts/deb.sh"
        );
        return;
    }
    let _lock = MachineLock::take();
    // scripts/test.sh builds the package before the tests and names it in IBSCOPE_DEB;
    // otherwise it is built here (a release build: allow for it). Built from within the
    // test, cargo sees the test's environment and may build much of the tree again.
    let deb = match std::env::var("IBSCOPE_DEB") {
        Ok(path) if !path.is_empty() => path,
        _ => {
            let mut build = Command::new("bash");
            build.arg(repo_root().join("scripts/deb.sh"));
            let out = run_with_timeout(build, Duration::from_secs(40 * 60));
            assert_success(&out)
                .trim()
                .lines()
                .last()
                .unwrap()
                .to_string()
        }
    };
    assert!(deb.ends_with(".deb"), "{deb}");
    let deb = repo_root().join(deb);

    // What the package holds.
    let contents = assert_success(&run("dpkg-deb", &["-c", &deb.display().to_string()]));
    let has = |path: &str| contents.lines().any(|l| l.ends_with(path));
    let mut missing: Vec<String> = [
        "./usr/bin/ibscope",
        "./usr/share/man/man1/ibscope.1.gz",
        "./usr/share/man/man1/ibscope-serve.1.gz",
        "./usr/share/man/man1/ibscope-route-trace.1.gz",
        "./usr/share/bash-completion/completions/ibscope",
        "./usr/share/zsh/vendor-completions/_ibscope",
        "./usr/share/fish/vendor_completions.d/ibscope.fish",
        "/systemd/system/ibscope-serve.service",
        "./usr/share/doc/ibscope/examples/grafana/ibscope-fabric.json",
        "./usr/share/doc/ibscope/examples/prometheus/ibscope-alerts.yml",
        "./usr/share/doc/ibscope/examples/udev/90-ibscope-umad.rules",
    ]
    .iter()
    .filter(|p| !has(p))
    .map(|p| p.to_string())
    .collect();
    for cmd in ["check", "serve", "config", "completions", "man"] {
        let page = format!("./usr/share/man/man1/ibscope-{cmd}.1.gz");
        if !has(&page) {
            missing.push(page);
        }
    }
    assert!(
        missing.is_empty(),
        "not in the package: {missing:?}\n{contents}"
    );
    let depends = assert_success(&run(
        "dpkg-deb",
        &["-f", &deb.display().to_string(), "Depends"],
    ));
    assert!(depends.contains("libibumad3"), "Depends: {depends}");
    // The default build links libibverbs (`ibscope host`'s verbs feature).
    assert!(depends.contains("libibverbs1"), "Depends: {depends}");

    // Install it as an operator would, and run it.
    let was_installed = installed();
    assert_success(&run("dpkg", &["-i", &deb.display().to_string()]));
    assert!(installed());
    let version = assert_success(&run("/usr/bin/ibscope", &["--version"]));
    assert_eq!(
        version.trim(),
        format!("ibscope {}", env!("CARGO_PKG_VERSION"))
    );
    // It is this tree's build: its completion is what this tree generates.
    let ours = assert_success(&ibscope_plain(&["completions", "bash"], &[]));
    let theirs = std::fs::read_to_string("/usr/share/bash-completion/completions/ibscope").unwrap();
    assert_eq!(
        theirs, ours,
        "the installed completion differs from this tree's"
    );
    let unit = ["/lib/systemd/system", "/usr/lib/systemd/system"]
        .iter()
        .map(|d| Path::new(d).join("ibscope-serve.service"))
        .find(|p| p.exists())
        .expect("the unit installed");
    assert_eq!(
        std::fs::read_to_string(&unit).unwrap(),
        std::fs::read_to_string(repo_root().join(UNIT)).unwrap()
    );
    // systemd's own check of the installed unit (its binary and man page exist now), where
    // systemd is installed.
    match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => eprintln!("systemd-analyze is not installed: the unit is not verified"),
    }
    let help = assert_success(&run("/usr/bin/ibscope", &["config", "show"]));
    assert!(help.contains("serve.listen"), "{help}");

    if !was_installed {
        assert_success(&run("dpkg", &["--purge", "ibscope"]));
        assert!(!Path::new("/usr/bin/ibscope").exists());
    }
}
