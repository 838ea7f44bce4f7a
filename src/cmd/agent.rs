//! `ibscope agent`: serve one local port's MADs to another ibscope over stdin/stdout.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use ibscope_mad::umad::UmadPort;

use crate::cli::{exit, Global};

/// Relay the MADs of one local port over stdin and stdout, for an ibscope elsewhere.
///
/// Run by another ibscope, not by hand: a `[[fabric]]` table of its config file names
/// the command that starts this one (often over ssh), and that ibscope then works on the
/// fabric this host's port reaches as if the port were its own: one exporter or check
/// covers every fabric a site has, even those only other hosts are cabled to. The port is
/// -C/-P (default: the first CA, its first active port). It sends only what the other
/// side asks for (SubnGet for discovery; a Set only for `counters --reset` or `port`).
///
/// stdout carries the binary protocol only; messages go to stderr. The agent stops when
/// its input ends (the other ibscope closed it or exited).
///
/// Examples:
///   ibscope agent -C mlx5_1           # what the config below starts on mgmt2
///   # in the config file of the ibscope that uses the agent:
///   [[fabric]]
///   name = "storage"
///   command = "ssh -T mgmt2 ibscope agent -C mlx5_1"
///   # then, on that host:
///   ibscope -C storage check          # that fabric alone
///   ibscope -C all serve              # it and every local port
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub local_port: crate::cli::PortArgs,
}

pub fn run(g: &Global, _a: &Args) -> Result<ExitCode> {
    let opened = UmadPort::open(g.ca.as_deref(), g.port)
        .map(|port| {
            let receiver = port.receiver();
            (port, receiver)
        })
        .map_err(|e| e.to_string());
    // Run by another ibscope, the error travels to it in the protocol and it says it:
    // printed here too, it would be said twice. By hand, it is said here.
    if let Err(why) = &opened {
        if std::io::stdin().is_terminal() {
            eprintln!("ibscope: error: {why}");
        }
    }
    let failed = opened.is_err();
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout();
    ibscope_mad::relay::serve(opened, stdin, stdout)?;
    Ok(ExitCode::from(if failed { exit::ERROR } else { exit::OK }))
}
