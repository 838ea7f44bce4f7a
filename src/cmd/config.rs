//! `ibscope config show`: the settings in force and where each came from.

use std::process::ExitCode;

use anyhow::{anyhow, Result};

use crate::cli::exit;
use crate::config::InForce;

/// The settings in force and where each came from: built-in default, a config file, the
/// environment or a flag.
///
/// Files, lowest first (a later one wins key by key; flags win over all):
///   /etc/ibscope/config.toml         for the machine
///   ~/.config/ibscope/config.toml    for the user ($XDG_CONFIG_HOME/ibscope/config.toml)
///   $IBSCOPE_CONFIG                  this one file instead of both (empty: none)
/// and, as infiniband-diags reads them, /etc/rdma/ib-node-name-map ($IBSCOPE_NODE_NAME_MAP
/// overrides; empty: none) and /etc/infiniband-diags/error_thresholds (else
/// /etc/rdma/error_thresholds) when present.
/// IBSCOPE_ETC replaces /etc in these paths (for tests and packaging).
///
/// A config file (every key optional, named as its flag; paths relative to the file):
///   ca = "mlx5_0"
///   port = 1
///   timeout-ms = 200
///   retries = 3
///   max-outstanding = 128
///   node-name-map = "/etc/rdma/ib-node-name-map"
///   thresholds = "/etc/infiniband-diags/error_thresholds"
///   [serve]
///   listen = "127.0.0.1:9315"
///   interval = 10
///   counters = "all"            # or errors, data
///   active-only = false
///   switches-only = false
///   allow-remote = false
///   rediscover-every = 30
///
/// Examples:
///   ibscope config show
///   ibscope config show --json | jq '.settings["node-name-map"]'
///   ibscope --timeout-ms 500 config show      # a flag shows as the source
///   IBSCOPE_CONFIG=./lab.toml ibscope config show
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: ConfigCommand,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print every setting, its value and where it came from.
    #[command(after_help = "Examples:\n  ibscope config show\n  ibscope config show --json")]
    Show {
        /// JSON: {"files": [{path, read}], "settings": {KEY: {value, source, from}}}.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: &Args, settings: Option<&InForce>) -> Result<ExitCode> {
    let settings = settings.ok_or_else(|| anyhow!("no settings were resolved"))?;
    match a.command {
        ConfigCommand::Show { json } if json => {
            crate::output::print_json(&settings.to_json())?;
        }
        ConfigCommand::Show { .. } => print_text(settings),
    }
    Ok(ExitCode::from(exit::OK))
}

/// One `[[fabric]]` table, short: "compute (mlx5_0:1)", "storage (command)".
fn table_summary(v: &serde_json::Value) -> String {
    let Some(map) = v.as_object() else {
        return v.to_string();
    };
    let name = map.get("name").and_then(|n| n.as_str()).unwrap_or("?");
    let text = |k: &str| {
        map.get(k)
            .map(|v| v.as_str().map_or(v.to_string(), String::from))
    };
    match (text("ca"), text("port")) {
        (Some(ca), Some(port)) => format!("{name} ({ca}:{port})"),
        (Some(ca), None) => format!("{name} ({ca})"),
        _ => format!("{name} (command)"),
    }
}

fn print_text(s: &InForce) {
    println!("config files (later ones win):");
    if s.files.is_empty() {
        println!("  none ($IBSCOPE_CONFIG is empty)");
    }
    for f in &s.files {
        let state = if f.read { "read" } else { "not present" };
        println!("  {:<44} {state}", f.path.display());
    }
    println!();
    let rows: Vec<(String, String, String)> = s
        .settings
        .iter()
        .map(|e| {
            let value = match &e.value {
                serde_json::Value::Null => "-".to_string(),
                serde_json::Value::String(t) => t.clone(),
                serde_json::Value::Array(items) if items.is_empty() => "-".to_string(),
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(table_summary)
                    .collect::<Vec<_>>()
                    .join("; "),
                other => other.to_string(),
            };
            let mut from = e.source.to_string();
            if let Some(note) = e.note {
                from = format!("{from} ({note})");
            }
            (e.key.clone(), value, from)
        })
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(7);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(5);
    println!("{:<w0$}  {:<w1$}  from", "setting", "value");
    for (k, v, f) in rows {
        println!("{k:<w0$}  {v:<w1$}  {f}");
    }
}
