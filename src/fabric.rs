//! Getting at the fabric: open the local management port, or load a saved topology, and
//! the node-name map. Shared by every command.

use std::path::Path;

use anyhow::{Context, Result};
use ibscope_mad::engine::Engine;
use ibscope_topo::counters::Thresholds;
use ibscope_topo::discover::{self, DiscoverOptions};
use ibscope_topo::input;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::Fabric;

use crate::cli::Global;
// The transport's loss is told where engines are opened; every command reaches it here.
pub use crate::fabric_set::is_transport_lost;

/// Open the CA port named by -C/-P (defaults: first CA, first active port; a configured
/// fabric's name reaches it as configured), SMPs carrying the --m-key. One fabric only:
/// see [`crate::fabric_set`] for commands that take several.
pub fn open_engine(g: &Global) -> Result<Engine> {
    crate::fabric_set::open_single(g)
}

/// The node-name map given with --node-name-map, if any; under a simulator (`ibscope sim`,
/// `demo`) with ibsim's node ids (`R1L001`) as aliases, so the names its console and the
/// demo use name nodes here too.
pub fn names(g: &Global) -> Result<Option<NameMap>> {
    let mut map = match &g.node_name_map {
        Some(path) => Some(NameMap::load(path)?),
        None => None,
    };
    if let Some(topology) = std::env::var_os(ibscope_sim::TOPOLOGY_ENV).filter(|t| !t.is_empty()) {
        match sim_node_ids(Path::new(&topology)) {
            Ok(ids) => {
                let map = map.get_or_insert_with(NameMap::new);
                for (id, guid) in ids {
                    map.insert_alias(id, guid);
                }
            }
            Err(e) => eprintln!(
                "warning: {}: ibsim's node ids are not names here: {e:#}",
                ibscope_sim::TOPOLOGY_ENV
            ),
        }
    }
    Ok(map)
}

/// The node ids of the topology file a simulator runs, with the GUIDs ibsim gives them.
pub fn sim_node_ids(topology: &Path) -> Result<Vec<(String, u64)>> {
    let text = ibscope_topo::input::read_text(topology, "simulator topology")?;
    let parsed = ibscope_topo::ibnd::parse_with_warnings(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", topology.display()))?;
    Ok(parsed.node_ids)
}

/// The counter thresholds in force: `explicit` (a command's --thresholds) when given, else
/// the file the settings name (see `config`), else every error counter at 0.
pub fn thresholds(g: &Global, explicit: Option<&Path>) -> Result<Thresholds> {
    match explicit.or(g.thresholds.as_deref()) {
        Some(path) => {
            let text = input::read_text(path, "threshold file")?;
            Ok(Thresholds::parse(&text, &input::display_name(path))?)
        }
        None => Ok(Thresholds::default()),
    }
}

/// Load a topology file: an ibscope JSON snapshot or any ibnetdiscover output (plain,
/// `-g`, `-f`, `-p`) or ibsim topology. What the parser skipped or assumed is printed on
/// stderr as warnings.
pub fn load_file(path: &Path) -> Result<Fabric> {
    let (fabric, warnings) = read_file(path)?;
    for w in warnings {
        eprintln!("warning: {}: {w}", input::display_name(path));
    }
    Ok(fabric)
}

/// [`load_file`] without printing: the fabric and the warnings (already safe for a
/// terminal), for callers that own the screen.
pub fn read_file(path: &Path) -> Result<(Fabric, Vec<String>)> {
    let text = input::read_text(path, "topology file")?;
    parse_topology(&text, path, "topology file")
}

/// A topology file's text already read (`path` names it in errors, as the `what` it was
/// given as): a JSON snapshot or ibnetdiscover output, and what the parser skipped or
/// assumed. A file that describes no node is refused: nothing can be judged on it.
pub fn parse_topology(text: &str, path: &Path, what: &str) -> Result<(Fabric, Vec<String>)> {
    let name = input::display_name(path);
    let (fabric, warnings) = if text.trim_start().starts_with('{') {
        let fabric = ibscope_topo::export::json::read(text)
            .map_err(|e| anyhow::anyhow!("{what} {name}: {e}"))?;
        (fabric, Vec::new())
    } else {
        let parsed = ibscope_topo::ibnd::parse_with_warnings(text)
            .map_err(|e| anyhow::anyhow!("{what} {name}: {e}"))?;
        let warnings = parsed.warnings.iter().map(ToString::to_string).collect();
        (parsed.fabric, warnings)
    };
    if fabric.node_count() == 0 {
        anyhow::bail!(
            "{what} {name} describes no node (an ibnetdiscover output or an ibscope JSON \
             snapshot is expected)"
        );
    }
    Ok((fabric, warnings))
}

/// The fabric to analyse: `--topology FILE` when given, else a live discovery (of the one
/// fabric -C names, which it records as its identity).
pub fn load(g: &Global, options: DiscoverOptions) -> Result<Fabric> {
    if let Some(path) = &g.topology {
        return load_file(path);
    }
    let mut engine = open_engine(g)?;
    let mut fabric = discover_live(&mut engine, options)?;
    fabric.id = Some(id_of(g, &engine));
    Ok(fabric)
}

/// The identity of the one fabric `engine` is on, as documents name it: the config
/// file's name for it (the fabric -C names, or the one of its port), else CA:port.
pub fn id_of(g: &Global, engine: &Engine) -> ibscope_topo::FabricId {
    let local = engine.local();
    let name = match g.ca.as_deref() {
        Some(name) if g.fabrics.iter().any(|f| f.name == name) => name.to_string(),
        _ => crate::fabric_set::local_name(&local.ca_name, local.port_num, &g.fabrics),
    };
    ibscope_topo::FabricId::named(name)
}

/// Discover with a progress bar on stderr when it is a terminal. Fails (see
/// `Engine::ensure_connected`) when the transport was lost during the sweep.
pub fn discover_live(engine: &mut Engine, options: DiscoverOptions) -> Result<Fabric> {
    use std::io::IsTerminal;
    let bar = if std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} discovering: {msg} [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        Some(b)
    } else {
        None
    };
    let fabric = discover::discover(engine, options, |p| {
        if let Some(b) = &bar {
            b.set_message(format!("{} nodes, {} MADs", p.nodes, p.mads));
            b.tick();
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    engine.ensure_connected()?;
    Ok(fabric)
}

/// The names a `--hosts` value gives: a Slurm hostlist (`gpu-[0001-0064],login1`, as
/// `scontrol show hostnames` expands it), or `@FILE` holding hostlists separated by
/// commas, spaces or newlines (`#` comments; `scontrol show hostnames` output works).
pub fn host_list(arg: &str) -> Result<Vec<String>> {
    use ibscope_topo::hosts::hostlist;
    let (text, source) = list_text(arg)?;
    let names = hostlist::expand(&text).with_context(|| format!("{source}: not a hostlist"))?;
    if names.is_empty() {
        anyhow::bail!("{source}: no hosts");
    }
    Ok(names)
}

/// The text of a list argument: the argument itself, or for `@FILE` the file's lines
/// without their `#` comments; and how to name it in errors.
pub fn list_text(arg: &str) -> Result<(String, String)> {
    match arg.strip_prefix('@') {
        Some(path) => {
            let text = input::read_text(Path::new(path), "host list")?;
            let text: Vec<&str> = text
                .lines()
                .map(|l| l.split('#').next().unwrap_or(""))
                .collect();
            Ok((text.join("\n"), format!("host list {path}")))
        }
        None => Ok((arg.to_string(), "--hosts".to_string())),
    }
}
