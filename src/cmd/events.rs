//! `ibscope events`: the event journal `serve --journal` writes, filtered.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use ibscope_topo::journal::{self, Event};
use serde::Serialize;

use crate::cli::{exit, Global};

/// What happened to the fabric's links: the journal `ibscope serve --journal FILE` (or
/// `[serve] journal` in the config file) appends to: at each discovery links down and up,
/// port state changes, width and speed downshifts, with both ends; at each counter sweep
/// every rise of a port's LinkDowned (link-downed) or LinkErrorRecovery
/// (link-error-recovery) counter, with how much it rose.
///
/// Examples:
///   ibscope events --journal /var/lib/ibscope/events.jsonl --since 1h
///   ibscope events --journal events.jsonl --link leaf-07:17
///   ibscope events --journal events.jsonl --json | jq '.events[].kind'
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The journal; default: the config file's `[serve] journal`.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub journal: Option<PathBuf>,
    /// Only the events of the last DURATION (e.g. 30m, 1h, 2d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub since: Option<Duration>,
    /// Only the events of this link: NODE, NODE[PORT] or NODE:PORT, NODE a name as events
    /// print it (quotes and all), a short name, a server's hostname or a 0x GUID.
    #[arg(long, value_name = "NODE[:PORT]")]
    pub link: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    journal::parse_duration(text)
}

/// The journal to read: `--journal`, else the one `serve` is configured to write.
pub fn journal_path(explicit: Option<&PathBuf>, g: &Global) -> Result<PathBuf> {
    explicit
        .cloned()
        .or_else(|| g.serve.journal.clone())
        .context("no journal: give --journal FILE (the file `serve --journal` writes)")
}

#[derive(Serialize)]
struct Report<'a> {
    journal: String,
    skipped_lines: usize,
    events: &'a [Event],
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let path = journal_path(a.journal.as_ref(), g)?;
    let (mut events, skipped) = journal::read(&path)?;
    journal::select(&mut events, a.since, a.link.as_deref(), SystemTime::now());
    if a.json {
        crate::output::print_json(&Report {
            journal: path.display().to_string(),
            skipped_lines: skipped,
            events: &events,
        })?;
        return Ok(ExitCode::from(exit::OK));
    }
    let mut out = std::io::stdout().lock();
    for e in &events {
        writeln!(out, "{}", e.line())?;
    }
    if let Some(warning) = journal::skipped_warning(&path, skipped) {
        eprintln!("{warning}");
    }
    writeln!(out, "{} event(s)", events.len())?;
    out.flush()?;
    Ok(ExitCode::from(exit::OK))
}
