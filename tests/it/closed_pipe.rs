//! A reader that stops early (`ibscope links | head -1`) ends every command quietly with
//! exit 0: no panic, no message, as the standard tools behave in a pipeline.

use crate::common;

use std::process::Stdio;

use common::*;

/// Run `ibscope` with its stdout a pipe whose read end is already closed, so the first
/// write fails with EPIPE whatever the output's size.
fn run_into_closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(ibscope_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ibscope starts");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ibscope ends");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_ends_quietly_on_a_closed_pipe() {
    let fabric = repo_root().join("examples/fabrics/fat-tree-2l-64.topo");
    let f = fabric.to_str().unwrap();
    let runs: [&[&str]; 11] = [
        &["--topology", f, "links"],
        &["--topology", f, "links", "--json"],
        &["--topology", f, "check"],
        &["--topology", f, "check", "--json"],
        &["--topology", f, "discover"],
        &["--topology", f, "discover", "--format", "dot"],
        &["diff", f, f],
        &["completions", "bash"],
        &["man"],
        &["config", "show"],
        &["config", "show", "--json"],
    ];
    for args in runs {
        let (code, err) = run_into_closed_pipe(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?} wrote to stderr: {err}");
    }
}
