//! `ibscope host compare`: many servers' `ibscope host --json` documents, and the servers
//! that differ from the fleet's majority (the logic is `ibscope_host::compare`).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use ibscope_host::compare::{facts_of, outliers, read_documents, Outlier};
use ibscope_topo::escape::for_terminal;
use serde::Serialize;

use crate::cli::{exit, Global};

/// The actions of `ibscope host`.
#[derive(Debug, clap::Subcommand)]
pub enum HostAction {
    Compare(Args),
}

/// Servers whose firmware, drivers, nvidia_peermem or port settings differ from the majority.
///
/// Reads `ibscope host --json` documents (concatenated or one per line) from each FILE,
/// `-` for stdin, and names every server whose value of a field differs from the majority,
/// per field. A server is named by its hostname, else FILE#N.
///
/// Exit code: 0 all agree, 1 some server differs, 2 a document could not be read (the
/// message names the file and the document's position).
///
/// Examples:
///   ibscope host compare fleet/*.json
///   cat hosts.jsonl | ibscope host compare -
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Files of `ibscope host --json` documents; `-` reads stdin.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    servers: usize,
    consistent: bool,
    outliers: &'a [Outlier],
}

pub fn run(_g: &Global, a: &Args) -> Result<ExitCode> {
    let mut servers = Vec::new();
    for file in &a.files {
        let (name, text) = if file.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading stdin")?;
            ("-".to_string(), text)
        } else {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            (file.display().to_string(), text)
        };
        for (i, doc) in read_documents(&name, &text)?.iter().enumerate() {
            servers.push(facts_of(doc, &format!("{name}#{}", i + 1)));
        }
    }
    let found = outliers(&servers);
    let mut out = std::io::stdout().lock();
    if a.json {
        let report = Report {
            servers: servers.len(),
            consistent: found.is_empty(),
            outliers: &found,
        };
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&crate::output::json_document(&report)?)?
        )?;
    } else if found.is_empty() {
        writeln!(
            out,
            "{} servers agree on every compared field",
            servers.len()
        )?;
    } else {
        for o in &found {
            writeln!(out, "{}", for_terminal(&o.to_string()))?;
        }
    }
    out.flush()?;
    Ok(ExitCode::from(if found.is_empty() {
        exit::OK
    } else {
        exit::FINDINGS
    }))
}
