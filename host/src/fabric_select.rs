//! Which fabrics a command works on, as `-C`/`-P` and the config file's `[[fabric]]`
//! tables select them from the local CAs libibumad lists: pure, so it is tested without
//! hardware. Opening them is the binary's part.

use anyhow::{bail, Result};
use ibscope_mad::engine::{LocalPort, TransportError};
use ibscope_mad::umad;
use serde::{Deserialize, Serialize};

use crate::multi_plane::{local_planes, port_name, LocalPlanes};

/// One `[[fabric]]` table of the config file: a name, and how the fabric is reached: a
/// local CA (and port), or a command that runs `ibscope agent` (see `ibscope agent
/// --help`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FabricConfig {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl FabricConfig {
    /// The checks a list of tables must pass, worded for the file's author.
    pub fn validate(list: &[FabricConfig]) -> Result<(), String> {
        for (i, f) in list.iter().enumerate() {
            let name = f.name.trim();
            if name.is_empty() || name.contains([',', '"', '\n']) || name == "all" {
                return Err(format!(
                    "fabric name {:?}: must be non-empty, not \"all\", without commas or quotes",
                    f.name
                ));
            }
            if list[..i].iter().any(|g| g.name == f.name) {
                return Err(format!("fabric {:?} is named twice", f.name));
            }
            match (&f.ca, &f.command) {
                (Some(_), None) => {}
                (None, Some(c)) if f.port.is_none() && !c.trim().is_empty() => {}
                (None, Some(_)) if f.port.is_some() => {
                    return Err(format!(
                        "fabric {:?}: port goes with ca (give the agent's -P in the command)",
                        f.name
                    ))
                }
                _ => {
                    return Err(format!(
                        "fabric {:?}: give either ca (a local CA) or command (one that runs \
                         `ibscope agent`)",
                        f.name
                    ))
                }
            }
        }
        Ok(())
    }
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
pub struct FabricToOpen {
    pub name: String,
    pub reach: Reach,
}

/// Whether `-C` names several fabrics: `all` or a comma-separated list.
pub fn is_multi(ca: Option<&str>) -> bool {
    ca.is_some_and(|c| c.trim() == "all" || c.contains(','))
}

/// The config's name of a local port, else "CA:port". A table with a port names that
/// port; one without names every port of its CA.
pub fn local_name(ca: &str, port: u8, configured: &[FabricConfig]) -> String {
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
fn select_item(
    item: &str,
    port: Option<u8>,
    cas: &[(String, Vec<LocalPort>)],
    configured: &[FabricConfig],
) -> Result<FabricToOpen> {
    if let Some(f) = configured.iter().find(|f| f.name == item) {
        if let Some(command) = &f.command {
            return Ok(FabricToOpen {
                name: f.name.clone(),
                reach: Reach::Relay {
                    command: command.clone(),
                },
            });
        }
        let chosen = umad::choose_port(cas, f.ca.as_deref(), f.port.or(port))?;
        return Ok(FabricToOpen {
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
    Ok(FabricToOpen {
        name: local_name(&chosen.ca_name, chosen.port_num, configured),
        reach: Reach::Local {
            ca: chosen.ca_name,
            port: chosen.port_num,
        },
    })
}

/// The fabrics `-C`/`-P` select (pure: the CAs and their ports as libibumad lists them,
/// and the config's tables). Also what `all` left out and why.
pub fn select(
    selection: Option<&str>,
    port: Option<u8>,
    cas: &[(String, Vec<LocalPort>)],
    configured: &[FabricConfig],
) -> Result<(Vec<FabricToOpen>, Vec<String>)> {
    let Some(selection) = selection.filter(|s| !s.trim().is_empty()) else {
        return Ok((
            vec![FabricToOpen {
                name: String::new(),
                reach: Reach::Default { ca: None, port },
            }],
            Vec::new(),
        ));
    };
    let mut selected = Vec::new();
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
                        selected.push(FabricToOpen {
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
                    selected.push(FabricToOpen {
                        name: f.name.clone(),
                        reach: Reach::Relay {
                            command: command.clone(),
                        },
                    });
                }
            }
        } else {
            selected.push(select_item(item, port, cas, configured)?);
        }
    }
    // A port named twice (`-C all,mlx5_0`) is opened once.
    let mut unique: Vec<FabricToOpen> = Vec::new();
    for p in selected {
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
fn uniquify(selected: &mut [FabricToOpen]) {
    for i in 1..selected.len() {
        let base = selected[i].name.clone();
        let mut n = 1;
        while selected[..i].iter().any(|p| p.name == selected[i].name) {
            n += 1;
            selected[i].name = format!("{base} #{n}");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi_plane::tests::planarized;
    use ibscope_mad::attr::PortState;

    fn port(ca: &str, n: u8, state: PortState, ll: &str) -> LocalPort {
        LocalPort::listed(ca, n, state, ll)
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

    fn reaches(p: &[FabricToOpen]) -> Vec<(String, Reach)> {
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
        let (p, skipped) = select(Some("all"), None, &cas(), &configured()).unwrap();
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
        let (p, _) = select(Some("mlx5_0:2, compute"), None, &cas(), &configured()).unwrap();
        assert_eq!(
            reaches(&p),
            vec![
                ("mlx5_0:2".into(), local("mlx5_0", 2)),
                ("compute".into(), local("mlx5_0", 1)),
            ]
        );
        // A CA alone is its first active port (or -P); named twice, opened once.
        let (p, _) = select(Some("mlx5_0,mlx5_3,mlx5_0:1"), None, &cas(), &[]).unwrap();
        assert_eq!(
            reaches(&p),
            vec![
                ("mlx5_0:1".into(), local("mlx5_0", 1)),
                ("mlx5_3:1".into(), local("mlx5_3", 1)),
            ]
        );
        // -P applies to every CA named without a port.
        let (p, _) = select(Some("mlx5_0,compute"), Some(2), &cas(), &configured()).unwrap();
        assert_eq!(p[0].reach, local("mlx5_0", 2));
        assert_eq!(p[1].reach, local("mlx5_0", 1), "the table's own port wins");
        let e = select(Some("mlx5_0,mlx5_3"), Some(2), &cas(), &[]).unwrap_err();
        assert_eq!(e.to_string(), "mlx5_3 has no port 2 (ports: 1)");
    }

    #[test]
    fn bad_selections_say_what_exists() {
        let e = select(Some("mlx5_9,mlx5_0"), None, &cas(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"mlx5_9\" not found"), "{e}");
        assert!(e.contains("mlx5_0, mlx5_1, mlx5_2, mlx5_3"), "{e}");
        let e = select(Some("mlx5_0:x"), None, &cas(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be a number"), "{e}");
        let e = select(Some("mlx5_0:7"), None, &cas(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no port 7"), "{e}");
        let e = select(Some("all"), None, &[], &[]).unwrap_err().to_string();
        assert!(e.contains("no InfiniBand device found"), "{e}");
        let only_down = &cas()[1..3];
        let e = select(Some("all"), None, only_down, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("mlx5_1:1: port is down"), "{e}");
    }

    #[test]
    fn a_name_given_twice_is_told_apart() {
        let mut p = vec![
            FabricToOpen {
                name: "a".into(),
                reach: local("x", 1),
            },
            FabricToOpen {
                name: "a".into(),
                reach: local("x", 2),
            },
            FabricToOpen {
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
        let (p, skipped) = select(Some("all"), None, &cas, &[]).unwrap();
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
