//! `ibscope man`: roff man pages generated from the clap definition.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::cli::exit;

/// Print ibscope's man page, or one command's, or write them all to a directory.
///
/// Pages are named as git names its own: ibscope(1), ibscope-check(1),
/// ibscope-route-trace(1). They are generated from the same definition the command line is
/// parsed with; the Debian package installs them already.
///
/// Examples:
///   ibscope man | man -l -
///   ibscope man route trace | man -l -
///   ibscope man --dir /usr/local/share/man/man1 && mandb -q
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Write ibscope.1 and one page per command (ibscope-check.1, ...) into DIR instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command", value_hint = clap::ValueHint::DirPath)]
    pub dir: Option<PathBuf>,
    /// The command whose page to print, e.g. `check` or `route trace`.
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `root` is the whole command tree (`app::command()`, passed in: app dispatches here).
pub fn run(a: &Args, root: clap::Command) -> Result<ExitCode> {
    if let Some(dir) = &a.dir {
        let n = write_all(&root, dir)?;
        eprintln!("{n} man pages written to {}", dir.display());
        return Ok(ExitCode::from(exit::OK));
    }
    let mut cmd = root;
    cmd.build();
    let mut name = vec!["ibscope".to_string()];
    for word in &a.command {
        let Some(sub) = cmd.find_subcommand(word).cloned() else {
            bail!(
                "no command `{} {word}`: try `ibscope man --dir DIR` for every page",
                name.join(" ")
            );
        };
        name.push(word.clone());
        cmd = sub;
    }
    let page = render(cmd)?;
    std::io::stdout().write_all(&page)?;
    Ok(ExitCode::from(exit::OK))
}

/// One page of a built command (its display name, e.g. `ibscope-route-trace`, is the
/// page's title).
fn render(cmd: clap::Command) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .source(format!("ibscope {}", env!("CARGO_PKG_VERSION")))
        .manual("ibscope manual")
        .render(&mut out)?;
    Ok(out)
}

/// Every page of the tree into `dir`; returns how many.
pub fn write_all(root: &clap::Command, dir: &Path) -> Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut root = root.clone();
    root.build();
    let mut n = 0;
    let mut pending = vec![root];
    while let Some(cmd) = pending.pop() {
        pending.extend(
            cmd.get_subcommands()
                .filter(|s| s.get_name() != "help")
                .cloned(),
        );
        let name = page_name(&cmd);
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, render(cmd)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        n += 1;
    }
    Ok(n)
}

/// `ibscope`, `ibscope-check`, `ibscope-route-trace`: what clap calls the built command.
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}
