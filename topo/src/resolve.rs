//! Naming nodes and ports in text, as every command line and the TUI's routing inputs do:
//! a LID (decimal, or 0x-hex when no GUID has that value), a node or port GUID (0x-hex), or
//! a name (node-name-map name or NodeDescription), optionally followed by `[port]`.

use crate::escape;
use crate::model::{End, Fabric, NodeId};
use crate::namemap::{display_name, NameMap};

/// The highest unicast LID (IBA 4.1.3); above it multicast and permissive LIDs.
const MAX_UNICAST_LID: u64 = 0xbfff;

/// What a text names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedTarget {
    Node(NodeId),
    /// A port: named by its GUID, or by `node[port]`.
    Port(End),
    /// A LID (with its LMC range) and the port that owns it.
    Lid {
        lid: u16,
        owner: End,
    },
}

/// How names match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameMatch {
    /// The whole name (what a command that may change the fabric wants).
    Exact,
    /// The whole name, else a unique case-insensitive part of one (interactive input).
    ExactOrPart,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("empty")]
    Empty,
    #[error("no port has LID {0}")]
    NoLid(u16),
    #[error("LID {0} is not a unicast LID (1-49151)")]
    NotUnicast(u64),
    #[error("no node or port with GUID {0:#018x} in the fabric")]
    NoGuid(u64),
    #[error("no port {0} on that node")]
    NoPort(u8),
    /// Nothing has that name (escaped for a terminal).
    #[error(
        "nothing matches \"{0}\" (no node has that name; give a LID, a 0x GUID, a \
         NodeDescription or a node-name-map name)"
    )]
    NoName(String),
    /// Several nodes have that name (escaped): some of their GUIDs.
    #[error("\"{name}\" matches several nodes ({guids}); name one by GUID")]
    Ambiguous { name: String, guids: String },
}

impl NamedTarget {
    /// The node a target is on (a LID's owner).
    pub fn node(self) -> NodeId {
        match self {
            NamedTarget::Node(id) => id,
            NamedTarget::Port(end) | NamedTarget::Lid { owner: end, .. } => end.node,
        }
    }

    /// The port a target stands for: its own, a LID's owner, or a node's default port (a
    /// switch's port 0, a CA's first linked port, else its first port).
    pub fn end(self, fabric: &Fabric) -> End {
        match self {
            NamedTarget::Port(end) | NamedTarget::Lid { owner: end, .. } => end,
            NamedTarget::Node(id) => default_port(fabric, id),
        }
    }

    /// The port the text named, when it named one of a node's ports: a CA port by GUID,
    /// LID or `[port]`, a switch port by `[port]`. A switch's LID and port 0 stand for the
    /// whole switch.
    pub fn named_port(self, fabric: &Fabric) -> Option<u8> {
        let end = match self {
            NamedTarget::Node(_) => return None,
            NamedTarget::Port(end) | NamedTarget::Lid { owner: end, .. } => end,
        };
        let on_switch = fabric.node(end.node).is_switch();
        let whole_switch = on_switch && (end.port == 0 || matches!(self, NamedTarget::Lid { .. }));
        (!whole_switch).then_some(end.port)
    }
}

/// A node's default port: a switch's port 0, a CA's first linked port, else its first.
pub fn default_port(fabric: &Fabric, id: NodeId) -> End {
    let node = fabric.node(id);
    if node.is_switch() {
        return End { node: id, port: 0 };
    }
    let linked = node.ports.iter().find(|p| {
        fabric
            .peer(End {
                node: id,
                port: p.number,
            })
            .is_some()
    });
    let port = linked
        .or_else(|| node.ports.first())
        .map(|p| p.number)
        .unwrap_or(1);
    End { node: id, port }
}

/// The LID a port is addressed by: a switch's own, a CA port's.
pub fn lid_of(fabric: &Fabric, end: End) -> Option<u16> {
    let node = fabric.node(end.node);
    if node.is_switch() {
        return node.lid();
    }
    node.port(end.port).map(|p| p.lid).filter(|&l| l != 0)
}

/// Split `name[port]`; text without a valid `[port]` is all name.
fn split_port(text: &str) -> (&str, Option<u8>) {
    match text.strip_suffix(']').and_then(|t| t.rsplit_once('[')) {
        Some((base, port)) => match port.trim().parse::<u8>() {
            Ok(n) => (base.trim(), Some(n)),
            Err(_) => (text, None),
        },
        None => (text, None),
    }
}

/// Resolve `text` in `fabric`; `names` is the node-name map, if any.
pub fn resolve(
    fabric: &Fabric,
    names: Option<&NameMap>,
    text: &str,
    matching: NameMatch,
) -> Result<NamedTarget, ResolveError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ResolveError::Empty);
    }
    let (base, port) = split_port(text);
    let with_port = |node: NodeId| match port {
        None => Ok(NamedTarget::Node(node)),
        Some(p) if fabric.node(node).port(p).is_some() => {
            Ok(NamedTarget::Port(End { node, port: p }))
        }
        Some(p) => Err(ResolveError::NoPort(p)),
    };
    if let Some(hex) = base.strip_prefix("0x").or_else(|| base.strip_prefix("0X")) {
        if let Ok(n) = u64::from_str_radix(hex, 16) {
            return by_number(fabric, n, true, port, with_port);
        }
    } else if !base.is_empty() && base.chars().all(|c| c.is_ascii_digit()) {
        let n = base.parse::<u64>().unwrap_or(u64::MAX);
        return by_number(fabric, n, false, port, with_port);
    }
    with_port(by_name(fabric, names, base, matching)?)
}

/// A number: a GUID (hex only, tried first) or a LID.
fn by_number(
    fabric: &Fabric,
    n: u64,
    hex: bool,
    port: Option<u8>,
    with_port: impl Fn(NodeId) -> Result<NamedTarget, ResolveError>,
) -> Result<NamedTarget, ResolveError> {
    if hex {
        if let Some(id) = fabric.node_by_guid(n) {
            return with_port(id);
        }
        if let Some(end) = fabric.port_by_guid(n) {
            return match port {
                None => Ok(NamedTarget::Port(end)),
                Some(_) => with_port(end.node),
            };
        }
    }
    if !(1..=MAX_UNICAST_LID).contains(&n) {
        return Err(if hex {
            ResolveError::NoGuid(n)
        } else {
            ResolveError::NotUnicast(n)
        });
    }
    let lid = n as u16;
    match (fabric.port_by_lid(lid), port) {
        (None, _) => Err(ResolveError::NoLid(lid)),
        (Some(owner), None) => Ok(NamedTarget::Lid { lid, owner }),
        (Some(owner), Some(_)) => with_port(owner.node),
    }
}

/// A node by name: exactly, else (with [`NameMatch::ExactOrPart`]) by a unique part.
fn by_name(
    fabric: &Fabric,
    names: Option<&NameMap>,
    name: &str,
    matching: NameMatch,
) -> Result<NodeId, ResolveError> {
    let mut hits: Vec<NodeId> = fabric
        .nodes()
        .filter(|(_, n)| display_name(n, names) == name || n.description == name)
        .map(|(id, _)| id)
        .collect();
    if hits.is_empty() && matching == NameMatch::ExactOrPart {
        let needle = name.to_lowercase();
        hits = fabric
            .nodes()
            .filter(|(_, n)| display_name(n, names).to_lowercase().contains(&needle))
            .map(|(id, _)| id)
            .take(6)
            .collect();
    }
    match hits.as_slice() {
        [one] => Ok(*one),
        [] => Err(ResolveError::NoName(escape::for_terminal(name))),
        many => {
            let mut guids: Vec<String> = many
                .iter()
                .take(5)
                .map(|id| format!("{:#018x}", fabric.node(*id).guid))
                .collect();
            if many.len() > 5 {
                guids.push("...".into());
            }
            Err(ResolveError::Ambiguous {
                name: escape::for_terminal(name),
                guids: guids.join(", "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ibnd;

    const FABRIC: &str =
        "Switch 4 \"S\" # \"sw\" base port 0 lid 1 lmc 0\n[1] \"H1\"[1]\n[2] \"H2\"[1]\n\n\
         Hca 1 \"H1\" # \"node-a\"\n[1] \"S\"[1] # lid 2 lmc 0 \"sw\" lid 1 4xHDR\n\n\
         Hca 1 \"H2\" # \"node-b\"\n[1] \"S\"[2] # lid 3 lmc 0 \"sw\" lid 1 4xHDR\n";

    fn fixture() -> (Fabric, NodeId, NodeId) {
        let f = ibnd::parse(FABRIC).unwrap();
        let sw = f.nodes_by_description("sw")[0];
        let a = f.nodes_by_description("node-a")[0];
        (f, sw, a)
    }

    fn part(f: &Fabric, names: Option<&NameMap>, text: &str) -> Result<NamedTarget, ResolveError> {
        resolve(f, names, text, NameMatch::ExactOrPart)
    }

    #[test]
    fn names_lids_guids_and_ports() {
        let (f, sw, a) = fixture();
        assert_eq!(part(&f, None, "sw"), Ok(NamedTarget::Node(sw)));
        assert_eq!(
            part(&f, None, "NODE-A"),
            Ok(NamedTarget::Node(a)),
            "unique part"
        );
        let several = part(&f, None, "node").unwrap_err().to_string();
        assert!(several.contains("several"), "{several}");
        let lid = |lid| NamedTarget::Lid {
            lid,
            owner: f.port_by_lid(lid).unwrap(),
        };
        assert_eq!(part(&f, None, "2"), Ok(lid(2)));
        assert_eq!(part(&f, None, "0x3"), Ok(lid(3)));
        assert_eq!(part(&f, None, "9"), Err(ResolveError::NoLid(9)));
        let guid = format!("{:#x}", f.node(sw).guid);
        assert_eq!(part(&f, None, &guid), Ok(NamedTarget::Node(sw)));
        assert_eq!(
            part(&f, None, "sw[2]"),
            Ok(NamedTarget::Port(End { node: sw, port: 2 }))
        );
        assert_eq!(part(&f, None, "sw[7]"), Err(ResolveError::NoPort(7)));
        assert_eq!(part(&f, None, ""), Err(ResolveError::Empty));
        let mut names = NameMap::new();
        names.insert(f.node(a).guid, "alpha");
        assert_eq!(part(&f, Some(&names), "alpha"), Ok(NamedTarget::Node(a)));
        assert_eq!(
            part(&f, None, "2[1]"),
            Ok(NamedTarget::Port(End { node: a, port: 1 }))
        );
    }

    #[test]
    fn exact_names_only_for_commands() {
        let (f, _, _) = fixture();
        let e = resolve(&f, None, "NODE-A", NameMatch::Exact).unwrap_err();
        assert_eq!(
            e.to_string(),
            "nothing matches \"NODE-A\" (no node has that name; give a LID, a 0x GUID, a \
             NodeDescription or a node-name-map name)"
        );
        let e = resolve(&f, None, "evil\x1b[2J", NameMatch::Exact).unwrap_err();
        assert!(!e.to_string().contains('\x1b'));
    }

    #[test]
    fn numbers_that_name_nothing() {
        let (f, _, _) = fixture();
        let exact = |t| resolve(&f, None, t, NameMatch::Exact);
        assert_eq!(exact("0"), Err(ResolveError::NotUnicast(0)));
        assert_eq!(exact("49152"), Err(ResolveError::NotUnicast(49152)));
        assert_eq!(exact("0xc000"), Err(ResolveError::NoGuid(0xc000)));
        assert_eq!(
            exact("0x1234567890").unwrap_err().to_string(),
            "no node or port with GUID 0x0000001234567890 in the fabric"
        );
    }

    #[test]
    fn what_a_target_stands_for() {
        let (f, sw, a) = fixture();
        let port_guid = f.node(a).port(1).unwrap().guid;
        let by_port_guid = part(&f, None, &format!("{port_guid:#x}")).unwrap();
        assert_eq!(by_port_guid, NamedTarget::Port(End { node: a, port: 1 }));
        assert_eq!(by_port_guid.named_port(&f), Some(1));
        let lid = |text| part(&f, None, text).unwrap();
        assert_eq!(lid("2").named_port(&f), Some(1), "a CA port's LID");
        assert_eq!(lid("1").named_port(&f), None, "a switch's LID");
        assert_eq!(NamedTarget::Node(sw).named_port(&f), None);
        assert_eq!(
            NamedTarget::Port(End { node: sw, port: 2 }).named_port(&f),
            Some(2)
        );
        assert_eq!(NamedTarget::Node(sw).end(&f), End { node: sw, port: 0 });
        assert_eq!(NamedTarget::Node(a).end(&f), End { node: a, port: 1 });
        assert_eq!(lid("3").node(), f.port_by_lid(3).unwrap().node);
        assert_eq!(lid_of(&f, End { node: sw, port: 2 }), Some(1));
        assert_eq!(lid_of(&f, End { node: a, port: 1 }), Some(2));
    }
}
