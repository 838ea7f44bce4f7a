//! `ibscope host compare`: many servers' `ibscope host --json` documents, and the servers
//! that differ from the fleet's majority (the logic is `ibscope_host::compare`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use ibscope_host::compare::{facts_of, outliers, read_documents, splits, Outlier, Split};
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
/// per field. A server is named by its hostname, else FILE#N. A field on which no value
/// is held by more than half of the servers (two servers that differ) blames nobody: each
/// value is listed with its servers.
///
/// Exit code: 0 all agree, 1 some server differs, 2 a document could not be read (the
/// message names the file and the document's position), a file holds none, or fewer than
/// two servers were given.
///
/// Examples:
///   ibscope host compare fleet/*.json
///   cat hosts.jsonl | ibscope host compare -
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Files of `ibscope host --json` documents; `-` reads stdin.
    #[arg(required = true, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
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
    /// Fields the servers differ on without a majority.
    splits: &'a [Split],
}

pub fn run(_g: &Global, a: &Args) -> Result<ExitCode> {
    let mut servers = Vec::new();
    for file in &a.files {
        let text = ibscope_topo::input::read_text(file, "host document file")?;
        let name = match ibscope_topo::input::is_stdin(file) {
            true => "-".to_string(),
            false => file.display().to_string(),
        };
        let docs = read_documents(&name, &text)?;
        if docs.is_empty() {
            bail!(
                "host document file {} holds no `ibscope host --json` document",
                ibscope_topo::input::display_name(file)
            );
        }
        for (i, doc) in docs.iter().enumerate() {
            servers.push(facts_of(doc, &format!("{name}#{}", i + 1)));
        }
    }
    if servers.len() < 2 {
        // One server agrees with itself: that is no comparison.
        let files: Vec<String> = a
            .files
            .iter()
            .map(|f| ibscope_topo::input::display_name(f))
            .collect();
        bail!(
            "{} holds one server's document: give the documents of two servers or more",
            files.join(", ")
        );
    }
    let found = outliers(&servers);
    let split = splits(&servers);
    let code = crate::output::verdict(if found.is_empty() && split.is_empty() {
        exit::OK
    } else {
        exit::FINDINGS
    });
    let mut out = std::io::stdout().lock();
    if a.json {
        let report = Report {
            servers: servers.len(),
            consistent: found.is_empty() && split.is_empty(),
            outliers: &found,
            splits: &split,
        };
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&crate::output::json_document(&report)?)?
        )?;
    } else if found.is_empty() && split.is_empty() {
        writeln!(
            out,
            "{} servers agree on every compared field",
            servers.len()
        )?;
    } else {
        for o in &found {
            writeln!(out, "{}", for_terminal(&o.to_string()))?;
        }
        for s in &split {
            writeln!(out, "{}", for_terminal(&s.to_string()))?;
        }
    }
    out.flush()?;
    Ok(ExitCode::from(code))
}
