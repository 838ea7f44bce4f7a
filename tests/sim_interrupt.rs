//! Ctrl-C during `ibscope sim up` (while OpenSM is still bringing a large fabric up) must
//! leave no ibsim or OpenSM process behind.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// PIDs of live processes whose working directory or command line lies under `dir`.
fn processes_under(dir: &Path) -> Vec<u32> {
    let dir = dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cwd = std::fs::read_link(entry.path().join("cwd"))
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if (cwd.starts_with(&dir) || cmdline.contains(&dir)) && pid_alive(pid) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn ctrl_c_during_sim_up_leaves_nothing() {
    let dir = temp_dir();
    let fat_tree = ["fat-tree", "--levels", "3", "--hosts", "2048"];
    let topo = sim_gen(dir.path(), "big.topo", &fat_tree);
    let state = dir.path().join("state");
    let mut child = Command::new(ibscope_bin())
        .args(["sim", "up", &topo, "--name", "interrupt"])
        .env("IBSCOPE_SIM_DIR", &state)
        .env_remove("LD_PRELOAD")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ibscope sim up starts");
    // Wait until OpenSM runs (its log exists) but the subnet is not up yet.
    let log = state.join("interrupt").join("opensm.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log.exists() {
        assert!(Instant::now() < deadline, "OpenSM never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = processes_under(dir.path());
    assert!(before.len() >= 2, "ibsim and opensm run: {before:?}");
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "sim up did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "interrupted sim up must fail: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_all_gone(&before);
    assert!(processes_under(dir.path()).is_empty());
}
