//! `ibscope completions`: shell completion scripts generated from the clap definition.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap_complete::Shell;

use crate::cli::exit;

/// Print a shell completion script for ibscope on stdout.
///
/// The script is generated from the same definition the command line is parsed with, so it
/// knows every command and flag of this version. The Debian package installs them already.
///
/// Examples:
///   ibscope completions bash > /etc/bash_completion.d/ibscope
///   ibscope completions bash > ~/.local/share/bash-completion/completions/ibscope
///   ibscope completions zsh > ~/.zfunc/_ibscope      # with fpath+=~/.zfunc before compinit
///   ibscope completions fish > ~/.config/fish/completions/ibscope.fish
///   source <(ibscope completions bash)                # this shell only
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `root` is the whole command tree (`app::command()`, passed in: app dispatches here).
pub fn run(a: &Args, root: clap::Command) -> Result<ExitCode> {
    let mut cmd = root;
    // Into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "ibscope", &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(ExitCode::from(exit::OK))
}
