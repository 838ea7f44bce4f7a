//! Which fabrics a command works on: one local port (the default, as infiniband-diags),
//! or several: `-C all` (every InfiniBand port of every CA, and every fabric of the config
//! file), `-C mlx5_0,mlx5_1`, `-C mlx5_0:1`, or a fabric named in the config file
//! (`[[fabric]]` tables, which can also reach a fabric through a command that runs
//! `ibscope agent`, e.g. over ssh). Ports that reach the same subnet are swept once.

use anyhow::{anyhow, bail, Result};
use ibscope_mad::engine::{Engine, LocalPort, MadError, TransportError};
use ibscope_mad::relay::AgentCommand;
use ibscope_mad::umad;
use ibscope_topo::subnet::{self, SubnetChoice};
use ibscope_topo::FabricId;

use crate::cli::Global;
pub use ibscope_host::fabric_select::{
    is_multi, local_name, planes_notes, select, FabricToOpen, Reach,
};
use ibscope_host::multi_plane::local_planes;
pub use ibscope_host::multi_plane::port_name;

/// Whether an error (anywhere in its chain) is the loss of the transport.
pub fn is_transport_lost(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<MadError>()
            .is_some_and(MadError::is_transport_lost)
    })
}

/// Every CA and its ports, as libibumad lists them.
fn local_cas() -> Vec<(String, Vec<LocalPort>)> {
    umad::ca_names()
        .into_iter()
        .filter_map(|name| umad::ca_ports(&name).ok().map(|ports| (name, ports)))
        .collect()
}

/// An opened fabric: its identity and the engine on it.
pub struct Opened {
    pub id: FabricId,
    pub reach: Reach,
    pub engine: Engine,
}

/// A fabric that could not be opened (with `-C` naming several, the others go on).
pub struct Unreached {
    pub name: String,
    pub reach: Reach,
    pub error: anyhow::Error,
}

/// The engine of the one fabric `-C`/`-P` name (a configured fabric's name and `CA:PORT`
/// included), for commands that work on one fabric; `-C all` or a list is refused.
pub fn open_single(g: &Global) -> Result<Engine> {
    let selection = g.ca.as_deref();
    if is_multi(selection) {
        bail!(
            "this command works on one fabric: -C {} names several (pick one: a CA, CA:PORT \
             or a [[fabric]] name)",
            selection.unwrap_or_default()
        );
    }
    let selected = match selection {
        Some(s) if s.contains(':') || g.fabrics.iter().any(|f| f.name == s.trim()) => {
            select(selection, g.port, &local_cas(), &g.fabrics)?
                .0
                .remove(0)
        }
        _ => FabricToOpen {
            name: String::new(),
            reach: Reach::Default {
                ca: g.ca.clone(),
                port: g.port,
            },
        },
    };
    engine_for(g, &selected.reach, &|| false)
}

fn engine_for(g: &Global, reach: &Reach, stop: &dyn Fn() -> bool) -> Result<Engine> {
    match open_engine_for(g, reach, stop) {
        Err(TransportError::NoDevice) if sim_without_shim() => bail!(
            "no InfiniBand device found: IBSCOPE_SIM names a simulated fabric, but this \
             process does not run under its shim (LD_PRELOAD): run `eval \"$(ibscope sim up \
             FILE)\"` in this shell, which exports IBSIM_SOCKNAME and LD_PRELOAD too, or \
             `ibscope sim exec -- COMMAND`"
        ),
        other => Ok(other?),
    }
}

fn open_engine_for(
    g: &Global,
    reach: &Reach,
    stop: &dyn Fn() -> bool,
) -> Result<Engine, TransportError> {
    let config = g.engine_config();
    let mut engine = match reach {
        Reach::Local { ca, port } => Engine::open(Some(ca), Some(*port), config)?,
        Reach::Relay { command } => {
            Engine::relay(&AgentCommand::Shell(command.clone()), config, stop)?
        }
        Reach::Default { ca, port } => Engine::open(ca.as_deref(), *port, config)?,
    };
    engine.set_m_key(g.m_key);
    Ok(engine)
}

/// Open what `selected` names, with the engine settings of `g`, and, when `-C` names
/// several fabrics, read its identity (subnet prefix and master SM: two MADs, what tells
/// the fabrics apart and finds two ports on one subnet). A command on one fabric sends
/// only what it did before there were several; its identity is its name.
pub fn open_one(g: &Global, selected: &FabricToOpen) -> Result<Opened> {
    open_one_until(g, selected, &|| false)
}

/// [`open_one`], giving up waiting for a relay's agent once `stop` returns true.
pub fn open_one_until(
    g: &Global,
    selected: &FabricToOpen,
    stop: &dyn Fn() -> bool,
) -> Result<Opened> {
    let engine = engine_for(g, &selected.reach, stop)?;
    identified(g, selected, engine)
}

/// `IBSCOPE_SIM` names a simulator but the umad shim is not preloaded: the exports of
/// `sim up` were only partly copied into this shell.
fn sim_without_shim() -> bool {
    std::env::var_os("IBSCOPE_SIM").is_some_and(|s| !s.is_empty())
        && !std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("umad2sim"))
}

/// [`open_one_until`] with the port `selected` names opened by `agent`, an agent started
/// for it (`serve` relays its local ports, so that a lost one is opened again by a new
/// process).
pub fn open_by_agent_until(
    g: &Global,
    selected: &FabricToOpen,
    agent: &AgentCommand,
    stop: &dyn Fn() -> bool,
) -> Result<Opened> {
    let mut engine = Engine::relay(agent, g.engine_config(), stop)?;
    engine.set_m_key(g.m_key);
    identified(g, selected, engine)
}

/// `engine`, opened on what `selected` names, with the fabric's name and identity.
fn identified(g: &Global, selected: &FabricToOpen, mut engine: Engine) -> Result<Opened> {
    let local = engine.local().clone();
    let name = if selected.name.is_empty() {
        local_name(&local.ca_name, local.port_num, &g.fabrics)
    } else {
        selected.name.clone()
    };
    let id = if is_multi(g.ca.as_deref()) {
        subnet::identify(&mut engine, local.port_num, &name)
    } else {
        FabricId::named(&name)
    };
    engine.ensure_connected()?;
    Ok(Opened {
        id,
        reach: selected.reach.clone(),
        engine,
    })
}

/// The fabrics of the command line: with one (the default) its error is the command's;
/// with several, each fabric's own, and a port on a subnet already opened is closed again
/// (noted on stderr).
pub fn open(g: &Global) -> Result<Vec<Result<Opened, Unreached>>> {
    let selection = g.ca.as_deref();
    let multi = is_multi(selection);
    let single_named = selection.is_some_and(|s| {
        !multi && (s.contains(':') || g.fabrics.iter().any(|f| f.name == s.trim()))
    });
    if !multi && !single_named {
        let selected = FabricToOpen {
            name: String::new(),
            reach: Reach::Default {
                ca: g.ca.clone(),
                port: g.port,
            },
        };
        return Ok(vec![Ok(open_one(g, &selected)?)]);
    }
    let (selected, skipped) = select(selection, g.port, &local_cas(), &g.fabrics)?;
    for s in &skipped {
        eprintln!("note: {s}: skipped");
    }
    if selection.is_some_and(|s| s.split(',').any(|i| i.trim() == "all")) {
        for line in planes_notes(&local_planes(&local_cas())) {
            eprintln!("note: {line}");
        }
    }
    if !multi {
        return Ok(vec![Ok(open_one(g, &selected[0])?)]);
    }
    let mut opened: Vec<Result<Opened, Unreached>> = selected
        .iter()
        .map(|p| {
            open_one(g, p).map_err(|error| Unreached {
                name: p.name.clone(),
                reach: p.reach.clone(),
                error,
            })
        })
        .collect();
    // One sweep per subnet: identities of the ports that opened, in order.
    let ids: Vec<FabricId> = opened
        .iter()
        .map(|o| {
            o.as_ref()
                .map_or_else(|_| FabricId::default(), |o| o.id.clone())
        })
        .collect();
    let verdict = subnet::one_per_subnet(&ids);
    let mut kept = Vec::new();
    for (i, o) in opened.drain(..).enumerate() {
        match verdict[i] {
            SubnetChoice::SameAs(j) => eprintln!(
                "note: {} reaches the same subnet as {} ({}): swept once, as {}",
                ids[i].name,
                ids[j].name,
                ids[i].identity_text(),
                ids[j].name
            ),
            SubnetChoice::Keep => kept.push(o),
        }
    }
    Ok(kept)
}

/// The fabrics of the command line, selected but not opened (for `serve`, whose sweepers
/// open them): the one of -C/-P (its name known once opened), or what `select` makes of
/// a list, `all` or a configured name. A port on a subnet another port reaches
/// is found only when both are open.
pub fn selected(g: &Global) -> Result<Vec<FabricToOpen>> {
    let selection = g.ca.as_deref();
    let multi = is_multi(selection);
    let single_named = selection.is_some_and(|s| {
        !multi && (s.contains(':') || g.fabrics.iter().any(|f| f.name == s.trim()))
    });
    if !multi && !single_named {
        return Ok(vec![FabricToOpen {
            name: String::new(),
            reach: Reach::Default {
                ca: g.ca.clone(),
                port: g.port,
            },
        }]);
    }
    let (mut selected, skipped) = select(selection, g.port, &local_cas(), &g.fabrics)?;
    for s in &skipped {
        eprintln!("note: {s}: skipped");
    }
    if !multi {
        selected.truncate(1);
    }
    Ok(selected)
}

/// What [`each`] saw: the worst exit code and the fabrics that failed.
pub struct Ran {
    pub worst: u8,
    pub failed: Vec<Failed>,
}

/// A fabric that could not be opened or whose run failed, as the several-fabric JSON
/// documents list it under `failed`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failed {
    pub fabric: FabricId,
    pub error: String,
}

impl Ran {
    pub fn exit_code(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(self.worst)
    }
}

/// Run `each_fabric` on every fabric of the command line (`multi`: `-C` named several);
/// the result is the worst of their exit codes (0 ok < 1 findings < 2 could not run). With
/// one fabric its error is the command's; with several, a fabric that cannot be opened or
/// whose run fails is one line on stderr (and exit code 2), and the others go on.
pub fn each(
    g: &Global,
    mut each_fabric: impl FnMut(&mut Opened, bool) -> Result<u8>,
) -> Result<Ran> {
    let multi = is_multi(g.ca.as_deref());
    let mut ran = Ran {
        worst: crate::cli::exit::OK,
        failed: Vec::new(),
    };
    for fabric in open(g)? {
        let outcome = match fabric {
            Ok(mut o) => each_fabric(&mut o, multi).map_err(|e| (o.id.name.clone(), e)),
            Err(u) => Err((u.name, u.error)),
        };
        match outcome {
            Ok(code) => ran.worst = ran.worst.max(crate::output::verdict(code)),
            // A reader that went away (`| head`) ends the command quietly, as with one.
            Err((_, e)) if !multi || crate::output::is_closed_pipe(&e) => return Err(e),
            Err((name, e)) => {
                eprintln!("ibscope: error: {}", failure_line(&name, &e));
                ran.worst = crate::output::verdict(crate::cli::exit::ERROR);
                ran.failed.push(Failed {
                    fabric: FabricId::named(name),
                    error: format!("{e:#}"),
                });
            }
        }
    }
    Ok(ran)
}

/// The one error line of a fabric that could not be used.
pub fn failure_line(name: &str, error: &anyhow::Error) -> String {
    format!("fabric {name}: {error:#}")
}

/// `anyhow` for a fabric's failure, naming it.
pub fn named_error(name: &str, error: anyhow::Error) -> anyhow::Error {
    anyhow!(failure_line(name, &error))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record every several-fabric JSON document lists under `failed`: its fabric
    /// in the shape every document gives it, then the error.
    #[test]
    fn a_failed_fabric_is_written_as_its_fabric_then_the_error() {
        let failed = Failed {
            fabric: FabricId::named("storage"),
            error: "no such CA".into(),
        };
        assert_eq!(
            serde_json::to_string(&[failed]).unwrap(),
            r#"[{"fabric":{"name":"storage"},"error":"no such CA"}]"#
        );
    }
}
