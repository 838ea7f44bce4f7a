//! `ibnetdiscover -p`, the ports report: one line per discovered port, with both ends of
//! its link when it has one.
//!
//! ```text
//! CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
//! SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'
//! ```
//!
//! The fields (as rdma-core's ibnetdiscover prints them): node type (`CA`, `SW`, `RT`), LID
//! (a switch's port 0 LID), port number, port GUID, active width and speed; for a linked
//! port the far end's type, LID, port and port GUID, then both NodeDescriptions.
//!
//! The report leaves out node GUIDs, port counts, LMCs and vendor/device ids. A switch's
//! ports carry its port 0 GUID, which names the switch; a CA port's GUID names a node of
//! its own (so the ports of a two-port CA become two nodes); a node has as many ports as
//! the highest port number listed. Loading says so in a warning: plain `ibnetdiscover`
//! output has all of it.

use std::collections::HashMap;

use ibscope_mad::attr::link::{Speed, Width};
use ibscope_mad::attr::NodeType;
use ibscope_mad::codes::guid;

use crate::escape;
use crate::model::{End, Fabric, Node, NodeKind, Port, PortKey, SwitchFacts};
use crate::parse_error::{ParseError, ParseWarning, Parsed};

/// One end as a report line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PortEnd {
    kind: NodeType,
    lid: u16,
    port: u8,
    guid: u64,
}

impl PortEnd {
    fn key(&self) -> PortKey {
        PortKey {
            guid: self.guid,
            port: self.port,
        }
    }
}

/// One line of the report.
#[derive(Debug)]
struct Record {
    own: PortEnd,
    width: Option<Width>,
    speed: Option<Speed>,
    name: String,
    /// The far end and its NodeDescription, for a linked port.
    remote: Option<(PortEnd, String)>,
}

/// The next whitespace-separated word and the rest.
fn word(text: &str) -> Option<(&str, &str)> {
    let t = text.trim_start();
    if t.is_empty() {
        return None;
    }
    let end = t.find(char::is_whitespace).unwrap_or(t.len());
    Some((&t[..end], &t[end..]))
}

/// `SW  1719 10 0x7cfe9003009ce5b0`: type, LID, port, port GUID.
fn port_end(text: &str) -> Option<(PortEnd, &str)> {
    let (kind, rest) = word(text)?;
    let kind = match kind {
        "CA" => NodeType::Ca,
        "SW" => NodeType::Switch,
        "RT" => NodeType::Router,
        _ => return None,
    };
    let (lid, rest) = word(rest)?;
    let (port, rest) = word(rest)?;
    let (port_guid, rest) = word(rest)?;
    if !port_guid.starts_with("0x") {
        return None;
    }
    let end = PortEnd {
        kind,
        lid: lid.parse().ok()?,
        // Port 0 (a switch's management port) is never in the report.
        port: port.parse().ok().filter(|&p| p != 0)?,
        guid: guid::parse(port_guid)?,
    };
    Some((end, rest))
}

/// `'name'` (quotes optional), trimmed of the surrounding blanks.
fn name(text: &str) -> String {
    let t = text.trim();
    let t = t
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .unwrap_or(t);
    t.to_string()
}

/// Parse one report line; `None` when it is not one.
fn record(line: &str) -> Option<Record> {
    let (own, rest) = port_end(line)?;
    let (width, rest) = word(rest)?;
    let (speed, rest) = word(rest)?;
    let width = Width::parse(width).filter(|w| w.is_known());
    let speed = Speed::parse(speed);
    let rest = rest.trim_start();
    let Some(rest) = rest.strip_prefix("- ") else {
        return Some(Record {
            own,
            width,
            speed,
            name: name(rest),
            remote: None,
        });
    };
    let (remote, rest) = port_end(rest)?;
    // "( 'own name' - 'remote name' )"
    let names = rest.trim().strip_prefix('(')?.strip_suffix(')')?.trim();
    let inner = names.strip_prefix('\'')?.strip_suffix('\'')?;
    let (own_name, remote_name) = inner.split_once("' - '")?;
    Some(Record {
        own,
        width,
        speed,
        name: own_name.to_string(),
        remote: Some((remote, remote_name.to_string())),
    })
}

/// Whether `text` is a ports report: among its first lines, a report line comes before
/// any line of the topology format.
pub(crate) fn is_ports_report(text: &str) -> bool {
    for line in text.lines().map(str::trim).take(20) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if record(line).is_some() {
            return true;
        }
        let topology_word = [
            "Switch",
            "Ca",
            "Hca",
            "Rt",
            "vendid",
            "devid",
            "sysimgguid",
            "switchguid",
            "caguid",
            "rtguid",
            "[",
        ]
        .iter()
        .any(|w| line.starts_with(w));
        if topology_word {
            return false;
        }
    }
    false
}

/// (port GUID, port) -> (far port GUID, far port, the line that said so).
type Peers = HashMap<PortKey, (PortKey, usize)>;

/// What is known of one node so far.
#[derive(Debug)]
struct Draft {
    kind: NodeType,
    description: String,
    /// A switch's port 0 LID.
    lid: u16,
    ports: HashMap<u8, Port>,
}

/// A problem in a ports report, said with the format's name.
fn problem(line: usize, what: String) -> ParseError {
    ParseError::sentence(
        line,
        format!(
            "{what} (in this `ibnetdiscover -p` ports report; plain `ibnetdiscover` output \
             describes the fabric without the report's gaps)"
        ),
    )
}

/// `0x0002c903007b78b0 port 3`.
fn end_text(end: PortKey) -> String {
    format!("{} port {}", guid::text(end.guid), end.port)
}

/// Record one end: its node (created on first sight) and its port.
fn note_end(
    drafts: &mut HashMap<u64, Draft>,
    order: &mut Vec<u64>,
    end: &PortEnd,
    description: &str,
    line: usize,
) -> Result<(), ParseError> {
    let draft = drafts.entry(end.guid).or_insert_with(|| {
        order.push(end.guid);
        Draft {
            kind: end.kind,
            description: description.to_string(),
            lid: if end.kind == NodeType::Switch {
                end.lid
            } else {
                0
            },
            ports: HashMap::new(),
        }
    });
    if draft.kind != end.kind {
        return Err(problem(
            line,
            format!(
                "GUID {} is listed as a {} and as a {}",
                guid::text(end.guid),
                draft.kind,
                end.kind
            ),
        ));
    }
    let port = draft.ports.entry(end.port).or_insert_with(|| Port {
        guid: end.guid,
        lid: end.lid,
        ..Port::new(end.port)
    });
    if port.lid == 0 {
        port.lid = end.lid;
    }
    Ok(())
}

/// Parse a ports report (see the module documentation).
pub(crate) fn parse(text: &str) -> Result<Parsed, ParseError> {
    let mut warnings = vec![ParseWarning {
        line: 0,
        message: "read as an `ibnetdiscover -p` ports report, which has no node GUIDs, port \
                  counts or LMCs: each CA port stands for a node of its own, named by its \
                  port GUID, and a node has as many ports as the highest number listed \
                  (plain `ibnetdiscover` output has them)"
            .to_string(),
    }];
    let mut drafts: HashMap<u64, Draft> = HashMap::new();
    let mut order = Vec::new();
    let mut peers = Peers::new();
    let mut started = false;
    for (index, raw) in text.lines().enumerate() {
        let lineno = index + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(rec) = record(line) else {
            if started {
                return Err(ParseError::new(
                    lineno,
                    "a ports report line (`SW 12 3 0x… 4x HDR - CA 7 1 0x… ( 'a' - 'b' )`)",
                    line,
                ));
            }
            warnings.push(ParseWarning {
                line: lineno,
                message: format!(
                    "skipped a line before the ports report that is not part of it: \"{}\"",
                    escape::for_terminal(&line.chars().take(200).collect::<String>())
                ),
            });
            continue;
        };
        started = true;
        note_end(&mut drafts, &mut order, &rec.own, &rec.name, lineno)?;
        let Some((remote, remote_name)) = &rec.remote else {
            continue;
        };
        let (own, far) = (rec.own.key(), remote.key());
        if far == own {
            return Err(problem(
                lineno,
                format!("{} is cabled to itself", end_text(far)),
            ));
        }
        note_end(&mut drafts, &mut order, remote, remote_name, lineno)?;
        for (here, there) in [(own, far), (far, own)] {
            match peers.get(&here) {
                Some(&(seen, l)) if seen != there => {
                    return Err(problem(
                        lineno,
                        format!(
                            "{} is cabled to {} here and to {} on line {l}",
                            end_text(here),
                            end_text(there),
                            end_text(seen)
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    peers.insert(here, (there, lineno));
                }
            }
        }
        // The line's width and speed are the link's: both ends run at them.
        for end in [&rec.own, remote] {
            if let Some(port) = drafts
                .get_mut(&end.guid)
                .and_then(|d| d.ports.get_mut(&end.port))
            {
                port.width_active = port.width_active.or(rec.width);
                port.speed_active = port.speed_active.or(rec.speed);
            }
        }
    }
    let fabric = build(drafts, &order, &peers)?;
    Ok(Parsed {
        fabric,
        warnings,
        node_ids: Vec::new(),
    })
}

fn build(
    mut drafts: HashMap<u64, Draft>,
    order: &[u64],
    peers: &Peers,
) -> Result<Fabric, ParseError> {
    let mut fabric = Fabric::new();
    let mut ids = HashMap::new();
    for &node_guid in order {
        let Some(draft) = drafts.remove(&node_guid) else {
            continue;
        };
        let kind = NodeKind::classify(draft.kind, &draft.description).unwrap_or_default();
        let mut ports: Vec<Port> = draft.ports.into_values().collect();
        ports.sort_by_key(|p| p.number);
        let num_ports = ports.iter().map(|p| p.number).max().unwrap_or(0).max(1);
        let mut node = Node {
            guid: node_guid,
            kind,
            description: draft.description,
            num_ports,
            ..Default::default()
        };
        if kind == NodeKind::Switch {
            node.switch = Some(SwitchFacts::default());
            node.set_port(Port {
                guid: node_guid,
                lid: draft.lid,
                ..Port::new(0)
            });
            for p in &mut ports {
                p.lid = draft.lid;
            }
        }
        for p in ports {
            node.set_port(p);
        }
        let id = fabric
            .add_node(node)
            .map_err(|e| problem(0, e.to_string()))?;
        ids.insert(node_guid, id);
    }
    let mut links: Vec<_> = peers.iter().collect();
    links.sort_unstable();
    for (&here, &(there, line)) in links {
        if here > there {
            continue;
        }
        let (Some(&a), Some(&b)) = (ids.get(&here.guid), ids.get(&there.guid)) else {
            continue;
        };
        fabric
            .connect(
                End {
                    node: a,
                    port: here.port,
                },
                End {
                    node: b,
                    port: there.port,
                },
            )
            .map_err(|e| problem(line, e.to_string()))?;
    }
    Ok(fabric)
}
