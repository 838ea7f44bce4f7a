//! Which fabrics a command works on: one local port (the default, as infiniband-diags),
//! or several: `-C all` (every InfiniBand port of every CA, and every fabric of the config
//! file), `-C mlx5_0,mlx5_1`, `-C mlx5_0:1`, or a fabric named in the config file
//! (`[[fabric]]` tables, which can also reach a fabric through a command that runs
//! `ibscope agent`, e.g. over ssh). Ports that reach the same subnet are swept once.

use anyhow::{anyhow, bail, Result};
use ibscope_mad::engine::{Engine, LocalPort, MadError, TransportError};
use ibscope_mad::umad;
use ibscope_topo::subnet::{self, Sweep};
use ibscope_topo::FabricId;

use crate::cli::{FabricConfig, Global};
pub use ibscope_host::multi_plane::port_name;
use ibscope_host::multi_plane::{local_planes, LocalPlanes};

/// Fail with the engine's "lost the connection to the fabric" error once its transport is
/// gone: a command then ends with that one message (exit 2) instead of one failure per
/// query.
pub fn ensure_connected(engine: &Engine) -> Result<()> {
    match engine.transport_lost() {
        Some(e) => Err(anyhow::Error::new(e.clone())),
        None => Ok(()),
    }
}

/// Whether an error (anywhere in its chain) is the loss of the transport.
pub fn is_transport_lost(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<MadError>()
            .is_some_and(MadError::is_transport_lost)
    })
}

/// How a fabric is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A local CA port.
    Local { ca: String, port: u8 },
    /// An `ibscope agent` started by this command.
    Relay { command: String },
    /// `-C`/`-P` as given (the single-fabric default: the first CA, its first active port).
    Default {
        ca: Option<String>,
        port: Option<u8>,
    },
}

/// A fabric a command will open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub name: String,
    pub reach: Reach,
}

/// Whether `-C` names several fabrics: `all` or a comma-separated list.
pub fn is_multi(ca: Option<&str>) -> bool {
    ca.is_some_and(|c| c.trim() == "all" || c.contains(','))
}

/// The config's name of a local port, else "CA:port". A table with a port names that
/// port; one without names every port of its CA.
fn local_name(ca: &str, port: u8, configured: &[FabricConfig]) -> String {
    let exact = configured
        .iter()
        .find(|f| f.ca.as_deref() == Some(ca) && f.port == Some(port));
    let any = || {
        configured
            .iter()
            .find(|f| f.ca.as_deref() == Some(ca) && f.port.is_none())
    };
    exact
        .or_else(any)
        .map_or_else(|| port_name(ca, port), |f| f.name.clone())
}

/// What one item of `-C` names.
fn plan_item(
    item: &str,
    port: Option<u8>,
    cas: &[(String, Vec<LocalPort>)],
    configured: &[FabricConfig],
) -> Result<Planned> {
    if let Some(f) = configured.iter().find(|f| f.name == item) {
        if let Some(command) = &f.command {
            return Ok(Planned {
                name: f.name.clone(),
                reach: Reach::Relay {
                    command: command.clone(),
                },
            });
        }
        let chosen = umad::choose_port(cas, f.ca.as_deref(), f.port.or(port))?;
        return Ok(Planned {
            name: f.name.clone(),
            reach: Reach::Local {
                ca: chosen.ca_name,
                port: chosen.port_num,
            },
        });
    }
    let (ca, number) = match item.rsplit_once(':') {
        Some((ca, n)) => match n.parse::<u8>() {
            Ok(n) => (ca, Some(n)),
            Err(_) => bail!("-C {item}: the port after ':' must be a number, e.g. mlx5_0:1"),
        },
        None => (item, port),
    };
    let chosen = umad::choose_port(cas, Some(ca), number)?;
    Ok(Planned {
        name: local_name(&chosen.ca_name, chosen.port_num, configured),
        reach: Reach::Local {
            ca: chosen.ca_name,
            port: chosen.port_num,
        },
    })
}

/// The fabrics `-C`/`-P` select (pure: the CAs and their ports as libibumad lists them,
/// and the config's tables). Also what `all` left out and why.
pub fn plan(
    selection: Option<&str>,
    port: Option<u8>,
    cas: &[(String, Vec<LocalPort>)],
    configured: &[FabricConfig],
) -> Result<(Vec<Planned>, Vec<String>)> {
    let Some(selection) = selection.filter(|s| !s.trim().is_empty()) else {
        return Ok((
            vec![Planned {
                name: String::new(),
                reach: Reach::Default { ca: None, port },
            }],
            Vec::new(),
        ));
    };
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for item in selection.split(',').map(str::trim) {
        if item.is_empty() {
            continue;
        }
        if item == "all" {
            let shared = local_planes(cas);
            for (ca, ports) in cas {
                for p in ports {
                    let name = port_name(ca, p.port_num);
                    let planes = shared.iter().find(|g| g.gsi.contains(&name));
                    if !umad::is_ib(p) {
                        skipped.push(format!("{name}: link layer {}", p.link_layer));
                    } else if let Some(g) = planes.filter(|g| !g.planes.is_empty()) {
                        skipped.push(format!(
                            "{name}: the GSI device of port {} (IsSMDisabled), swept through \
                             {}",
                            ibscope_mad::codes::guid::text(g.port_guid),
                            g.planes.join(", ")
                        ));
                    } else if p.state == ibscope_mad::attr::PortState::Down {
                        skipped.push(format!("{name}: port is down"));
                    } else {
                        planned.push(Planned {
                            name: local_name(ca, p.port_num, configured),
                            reach: Reach::Local {
                                ca: ca.clone(),
                                port: p.port_num,
                            },
                        });
                    }
                }
            }
            for f in configured {
                if let Some(command) = &f.command {
                    planned.push(Planned {
                        name: f.name.clone(),
                        reach: Reach::Relay {
                            command: command.clone(),
                        },
                    });
                }
            }
        } else {
            planned.push(plan_item(item, port, cas, configured)?);
        }
    }
    // A port named twice (`-C all,mlx5_0`) is opened once.
    let mut unique: Vec<Planned> = Vec::new();
    for p in planned {
        if !unique.iter().any(|u| u.reach == p.reach) {
            unique.push(p);
        }
    }
    if unique.is_empty() {
        if cas.is_empty() && configured.is_empty() {
            return Err(TransportError::NoDevice.into());
        }
        bail!(
            "-C {selection}: no InfiniBand port to use ({})",
            if skipped.is_empty() {
                "none found".to_string()
            } else {
                skipped.join("; ")
            }
        );
    }
    uniquify(&mut unique);
    Ok((unique, skipped))
}

/// Names must tell fabrics apart: a name given twice gets " #2", " #3".
fn uniquify(planned: &mut [Planned]) {
    for i in 1..planned.len() {
        let base = planned[i].name.clone();
        let mut n = 1;
        while planned[..i].iter().any(|p| p.name == planned[i].name) {
            n += 1;
            planned[i].name = format!("{base} #{n}");
        }
    }
}

/// One line for each local multi-plane port: which local ports are its planes.
pub fn planes_notes(groups: &[LocalPlanes]) -> Vec<String> {
    groups
        .iter()
        .filter(|g| g.planes.len() > 1)
        .map(|g| {
            let list: Vec<String> = g
                .planes
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{p} (plane {i})"))
                .collect();
            format!(
                "{} are the planes of one HCA port (port GUID {}), each swept as its own \
                 fabric",
                list.join(", "),
                ibscope_mad::codes::guid::text(g.port_guid)
            )
        })
        .collect()
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
    let planned = match selection {
        Some(s) if s.contains(':') || g.fabrics.iter().any(|f| f.name == s.trim()) => {
            plan(selection, g.port, &local_cas(), &g.fabrics)?
                .0
                .remove(0)
        }
        _ => Planned {
            name: String::new(),
            reach: Reach::Default {
                ca: g.ca.clone(),
                port: g.port,
            },
        },
    };
    Ok(engine_for(g, &planned.reach, &|| false)?)
}

fn engine_for(
    g: &Global,
    reach: &Reach,
    stop: &dyn Fn() -> bool,
) -> Result<Engine, TransportError> {
    let config = g.engine_config();
    let mut engine = match reach {
        Reach::Local { ca, port } => Engine::open(Some(ca), Some(*port), config)?,
        Reach::Relay { command } => Engine::relay(command, config, stop)?,
        Reach::Default { ca, port } => Engine::open(ca.as_deref(), *port, config)?,
    };
    engine.set_m_key(g.m_key);
    Ok(engine)
}

/// Open what `planned` names, with the engine settings of `g`, and, when `-C` names
/// several fabrics, read its identity (subnet prefix and master SM: two MADs, what tells
/// the fabrics apart and finds two ports on one subnet). A command on one fabric sends
/// only what it did before there were several; its identity is its name.
pub fn open_one(g: &Global, planned: &Planned) -> Result<Opened> {
    open_one_until(g, planned, &|| false)
}

/// [`open_one`], giving up waiting for a relay's agent once `stop` returns true.
pub fn open_one_until(g: &Global, planned: &Planned, stop: &dyn Fn() -> bool) -> Result<Opened> {
    let mut engine = engine_for(g, &planned.reach, stop)?;
    let local = engine.local().clone();
    let name = if planned.name.is_empty() {
        local_name(&local.ca_name, local.port_num, &g.fabrics)
    } else {
        planned.name.clone()
    };
    let id = if is_multi(g.ca.as_deref()) {
        subnet::identify(&mut engine, local.port_num, &name)
    } else {
        FabricId::named(&name)
    };
    ensure_connected(&engine)?;
    Ok(Opened {
        id,
        reach: planned.reach.clone(),
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
        let planned = Planned {
            name: String::new(),
            reach: Reach::Default {
                ca: g.ca.clone(),
                port: g.port,
            },
        };
        return Ok(vec![Ok(open_one(g, &planned)?)]);
    }
    let (planned, skipped) = plan(selection, g.port, &local_cas(), &g.fabrics)?;
    for s in &skipped {
        eprintln!("note: {s}: skipped");
    }
    if selection.is_some_and(|s| s.split(',').any(|i| i.trim() == "all")) {
        for line in planes_notes(&local_planes(&local_cas())) {
            eprintln!("note: {line}");
        }
    }
    if !multi {
        return Ok(vec![Ok(open_one(g, &planned[0])?)]);
    }
    let mut opened: Vec<Result<Opened, Unreached>> = planned
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
            Sweep::SameAs(j) => eprintln!(
                "note: {} reaches the same subnet as {} ({}): swept once, as {}",
                ids[i].name,
                ids[j].name,
                ids[i].identity_text(),
                ids[j].name
            ),
            Sweep::Keep => kept.push(o),
        }
    }
    Ok(kept)
}

/// The fabrics of the command line, planned but not opened (for `serve`, whose sweeper
/// processes open them): the one of -C/-P (its name known once opened), or what `plan`
/// makes of a list, `all` or a configured name. A port on a subnet another port reaches
/// is found only when both are open.
pub fn planned(g: &Global) -> Result<Vec<Planned>> {
    let selection = g.ca.as_deref();
    let multi = is_multi(selection);
    let single_named = selection.is_some_and(|s| {
        !multi && (s.contains(':') || g.fabrics.iter().any(|f| f.name == s.trim()))
    });
    if !multi && !single_named {
        return Ok(vec![Planned {
            name: String::new(),
            reach: Reach::Default {
                ca: g.ca.clone(),
                port: g.port,
            },
        }]);
    }
    let (mut planned, skipped) = plan(selection, g.port, &local_cas(), &g.fabrics)?;
    for s in &skipped {
        eprintln!("note: {s}: skipped");
    }
    if !multi {
        planned.truncate(1);
    }
    Ok(planned)
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
    pub fabric: String,
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
            Ok(code) => ran.worst = ran.worst.max(code),
            // A reader that went away (`| head`) ends the command quietly, as with one.
            Err((_, e)) if !multi || crate::output::is_closed_pipe(&e) => return Err(e),
            Err((name, e)) => {
                eprintln!("ibscope: error: {}", failure_line(&name, &e));
                ran.worst = crate::cli::exit::ERROR;
                ran.failed.push(Failed {
                    fabric: name,
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
    use ibscope_mad::attr::{PhysState, PortState};

    /// The record every several-fabric JSON document lists under `failed`.
    #[test]
    fn a_failed_fabric_is_written_as_its_name_then_the_error() {
        let failed = Failed {
            fabric: "storage".into(),
            error: "no such CA".into(),
        };
        assert_eq!(
            serde_json::to_string(&[failed]).unwrap(),
            r#"[{"fabric":"storage","error":"no such CA"}]"#
        );
    }

    fn port(ca: &str, n: u8, state: PortState, ll: &str) -> LocalPort {
        LocalPort {
            ca_name: ca.into(),
            ca_type: String::new(),
            node_guid: 0,
            port_num: n,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            state,
            phys_state: PhysState::LinkUp,
            port_guid: 0,
            link_layer: ll.into(),
            sm_disabled: false,
        }
    }

    fn cas() -> Vec<(String, Vec<LocalPort>)> {
        vec![
            (
                "mlx5_0".into(),
                vec![
                    port("mlx5_0", 1, PortState::Active, "InfiniBand"),
                    port("mlx5_0", 2, PortState::Active, "InfiniBand"),
                ],
            ),
            (
                "mlx5_1".into(),
                vec![port("mlx5_1", 1, PortState::Down, "InfiniBand")],
            ),
            (
                "mlx5_2".into(),
                vec![port("mlx5_2", 1, PortState::Active, "Ethernet")],
            ),
            (
                "mlx5_3".into(),
                vec![port("mlx5_3", 1, PortState::Init, "InfiniBand")],
            ),
        ]
    }

    fn configured() -> Vec<FabricConfig> {
        vec![
            FabricConfig {
                name: "compute".into(),
                ca: Some("mlx5_0".into()),
                port: Some(1),
                command: None,
            },
            FabricConfig {
                name: "remote".into(),
                ca: None,
                port: None,
                command: Some("ssh mgmt2 ibscope agent -C mlx5_1".into()),
            },
        ]
    }

    fn reaches(p: &[Planned]) -> Vec<(String, Reach)> {
        p.iter()
            .map(|p| (p.name.clone(), p.reach.clone()))
            .collect()
    }

    fn local(ca: &str, port: u8) -> Reach {
        Reach::Local {
            ca: ca.into(),
            port,
        }
    }

    #[test]
    fn all_is_every_usable_port_and_every_configured_command() {
        let (p, skipped) = plan(Some("all"), None, &cas(), &configured()).unwrap();
        assert_eq!(
            reaches(&p),
            vec![
                ("compute".into(), local("mlx5_0", 1)),
                ("mlx5_0:2".into(), local("mlx5_0", 2)),
                // Init: no SM yet, but directed routes work.
                ("mlx5_3:1".into(), local("mlx5_3", 1)),
                (
                    "remote".into(),
                    Reach::Relay {
                        command: "ssh mgmt2 ibscope agent -C mlx5_1".into()
                    }
                ),
            ]
        );
        assert_eq!(
            skipped,
            vec!["mlx5_1:1: port is down", "mlx5_2:1: link layer Ethernet"]
        );
    }

    #[test]
    fn lists_ports_and_names() {
        let (p, _) = plan(Some("mlx5_0:2, compute"), None, &cas(), &configured()).unwrap();
        assert_eq!(
            reaches(&p),
            vec![
                ("mlx5_0:2".into(), local("mlx5_0", 2)),
                ("compute".into(), local("mlx5_0", 1)),
            ]
        );
        // A CA alone is its first active port (or -P); named twice, opened once.
        let (p, _) = plan(Some("mlx5_0,mlx5_3,mlx5_0:1"), None, &cas(), &[]).unwrap();
        assert_eq!(
            reaches(&p),
            vec![
                ("mlx5_0:1".into(), local("mlx5_0", 1)),
                ("mlx5_3:1".into(), local("mlx5_3", 1)),
            ]
        );
        // -P applies to every CA named without a port.
        let (p, _) = plan(Some("mlx5_0,compute"), Some(2), &cas(), &configured()).unwrap();
        assert_eq!(p[0].reach, local("mlx5_0", 2));
        assert_eq!(p[1].reach, local("mlx5_0", 1), "the table's own port wins");
        let e = plan(Some("mlx5_0,mlx5_3"), Some(2), &cas(), &[]).unwrap_err();
        assert_eq!(e.to_string(), "mlx5_3 has no port 2 (ports: 1)");
    }

    #[test]
    fn bad_selections_say_what_exists() {
        let e = plan(Some("mlx5_9,mlx5_0"), None, &cas(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"mlx5_9\" not found"), "{e}");
        assert!(e.contains("mlx5_0, mlx5_1, mlx5_2, mlx5_3"), "{e}");
        let e = plan(Some("mlx5_0:x"), None, &cas(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be a number"), "{e}");
        let e = plan(Some("mlx5_0:7"), None, &cas(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no port 7"), "{e}");
        let e = plan(Some("all"), None, &[], &[]).unwrap_err().to_string();
        assert!(e.contains("no InfiniBand device found"), "{e}");
        let only_down = &cas()[1..3];
        let e = plan(Some("all"), None, only_down, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("mlx5_1:1: port is down"), "{e}");
    }

    #[test]
    fn a_name_given_twice_is_told_apart() {
        let mut p = vec![
            Planned {
                name: "a".into(),
                reach: local("x", 1),
            },
            Planned {
                name: "a".into(),
                reach: local("x", 2),
            },
            Planned {
                name: "a".into(),
                reach: local("x", 3),
            },
        ];
        uniquify(&mut p);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "a #2", "a #3"]);
    }

    #[test]
    fn config_tables_are_checked() {
        assert_eq!(FabricConfig::validate(&configured()), Ok(()));
        let mut twice = configured();
        twice[1].name = "compute".into();
        assert!(FabricConfig::validate(&twice)
            .unwrap_err()
            .contains("named twice"));
        let neither = vec![FabricConfig {
            name: "x".into(),
            ca: None,
            port: None,
            command: None,
        }];
        assert!(FabricConfig::validate(&neither)
            .unwrap_err()
            .contains("either ca"));
        let both = vec![FabricConfig {
            name: "x".into(),
            ca: Some("mlx5_0".into()),
            port: None,
            command: Some("y".into()),
        }];
        assert!(FabricConfig::validate(&both).is_err());
        let comma = vec![FabricConfig {
            name: "a,b".into(),
            ca: Some("mlx5_0".into()),
            port: None,
            command: None,
        }];
        assert!(FabricConfig::validate(&comma)
            .unwrap_err()
            .contains("commas"));
        assert!(is_multi(Some("all")) && is_multi(Some("a,b")));
        assert!(!is_multi(Some("mlx5_0:1")) && !is_multi(None));
    }

    /// A host with one two-plane HCA port as libibumad lists it: mlx5_0 and mlx5_1, the
    /// planes (SMI devices), and mlx5_2, the GSI device (IsSMDisabled), all with port GUID
    /// 0x...a1; mlx5_10 an ordinary port.
    fn planarized() -> Vec<(String, Vec<LocalPort>)> {
        let dev = |ca: &str, guid: u64, sm_disabled: bool| {
            let mut p = port(ca, 1, PortState::Active, "InfiniBand");
            p.port_guid = guid;
            p.sm_disabled = sm_disabled;
            (ca.to_string(), vec![p])
        };
        // libibumad's order is the kernel's: not the plane order.
        vec![
            dev("mlx5_10", 0xb1, false),
            dev("mlx5_2", 0xa1, true),
            dev("mlx5_1", 0xa1, false),
            dev("mlx5_0", 0xa1, false),
        ]
    }

    #[test]
    fn planes_of_one_port_are_noted_and_swept_but_not_its_gsi_device() {
        let cas = planarized();
        // Which ports are planes: host/src/multi_plane.rs; here the note and the sweep plan.
        let groups = local_planes(&cas);
        assert_eq!(
            planes_notes(&groups),
            vec![
                "mlx5_0:1 (plane 0), mlx5_1:1 (plane 1) are the planes of one HCA port \
                 (port GUID 0x00000000000000a1), each swept as its own fabric"
            ]
        );
        // -C all sweeps each plane (and the other port), not the GSI device.
        let (p, skipped) = plan(Some("all"), None, &cas, &[]).unwrap();
        let mut names: Vec<String> = p.into_iter().map(|p| p.name).collect();
        names.sort();
        assert_eq!(names, ["mlx5_0:1", "mlx5_10:1", "mlx5_1:1"]);
        assert_eq!(
            skipped,
            vec![
                "mlx5_2:1: the GSI device of port 0x00000000000000a1 (IsSMDisabled), swept \
                 through mlx5_0:1, mlx5_1:1"
            ]
        );
        // A GSI device apart from one SMI device is no plane: no note.
        let pair = local_planes(&cas[1..3]);
        assert!(planes_notes(&pair).is_empty());
    }
}
