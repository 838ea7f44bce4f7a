//! Naming nodes, ports and servers in text: the one resolver of every command line and the
//! TUI. What ibscope prints as a name, it reads back. A text is, tried in this order:
//! - a directed route from the local port, `0,1,3` (commas between egress ports);
//! - a LID (decimal, or 0x-hex when no GUID has that value), a node or port GUID (0x-hex);
//! - a name: a node-name-map name or NodeDescription, whole; an alias (a simulator's node
//!   id); a server, the hostname its CAs' descriptions share (`gpu-0001`), or one of its
//!   HCAs by hostname and device (`gpu-0001 mlx5_1`); a short name, whole pieces of a name
//!   between separators (`leaf-r4-001` of `MF0;leaf-r4-001:MQM9700/U1`, as the TUI and
//!   reports shorten names); a name elided in its middle with `…`, as the TUI draws a long
//!   one; and, for interactive input only, a unique case-insensitive part of a name;
//!
//! each name optionally in double quotes (as reports print names), or quoted and followed by
//! its GUID as reports name a node (`"gpu-0003 mlx5_5" (0x000000000010002a)`, the GUID
//! deciding), and any of them followed by `[port]` (`R1L001[9]`, `"gpu-0003 mlx5_5"[1]`).

use std::cell::OnceCell;

use ibscope_mad::smp::DrPath;

use crate::escape::{self, quoted_for_terminal};
use crate::hosts::hostlist::{self, HostlistError};
use crate::hosts::Hosts;
use crate::model::{End, Fabric, NodeId};
use crate::namemap::{display_name, NameMap};

/// The highest unicast LID (IBA 4.1.3); above it multicast and permissive LIDs.
const MAX_UNICAST_LID: u64 = 0xbfff;

/// How many candidates an error lists.
const LISTED: usize = 5;

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

/// A server named by its hostname: its HCA ports, by rail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub hcas: Vec<ServerHca>,
}

/// One HCA port of a [`Server`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHca {
    pub end: End,
    pub rail: Option<u8>,
    /// The device name (`mlx5_3`), where the description gives one.
    pub device: Option<String>,
}

/// What a text names when a server may stand for its HCAs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    Target(NamedTarget),
    Server(Server),
}

/// How names match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameMatch {
    /// A whole name, an alias, a server, a short name or an elided name (what a command
    /// line takes, even one that changes the fabric: each must name one node).
    Exact,
    /// As `Exact`, else a unique case-insensitive part of a name (interactive input).
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
    /// `what` names the node (escaped), `ports` its port numbers.
    #[error("{what} has ports {ports}; there is no port {port}")]
    NoPort {
        what: String,
        ports: String,
        port: u8,
    },
    /// Nothing has that name (escaped); `similar` lists names that contain it.
    #[error(
        "nothing matches \"{name}\" (no node or server has that name; give a LID, a 0x \
         GUID, a directed route such as 0,1,3, a NodeDescription, a short name or a \
         node-name-map name){similar}"
    )]
    NoName { name: String, similar: String },
    /// Several nodes have that name (escaped): some of them.
    #[error("\"{name}\" matches several nodes: {matches}; name one (a GUID always works)")]
    Ambiguous { name: String, matches: String },
    /// A server where one port is needed: its HCA ports.
    #[error("\"{name}\" is a server with {count} HCA ports ({hcas}): name one of them")]
    Server {
        name: String,
        count: usize,
        hcas: String,
    },
    /// A directed route that leads nowhere in this fabric.
    #[error("directed route {path}: {why}")]
    Route { path: String, why: String },
    /// A name printed with its GUID (`"name" (0x…)`) where the GUID is another node's.
    #[error("GUID {guid:#018x} is {shown}, not \"{name}\"")]
    NotThatGuid {
        guid: u64,
        name: String,
        shown: String,
    },
    /// Two servers (escaped) with no rail in common.
    #[error("\"{a}\" and \"{b}\" have no rail in common: name one HCA port of each")]
    NoSharedRail { a: String, b: String },
}

/// A flow between the ports two names stand for; `rail` when both are a server's HCAs on
/// that rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub rail: Option<u8>,
    pub src: End,
    pub dst: End,
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

/// Characters that separate the pieces of a name (`MF0;leaf-r4-001:MQM9700/U1`); dashes
/// and underscores join a piece.
pub fn is_name_separator(c: char) -> bool {
    matches!(c, ';' | ':' | ' ' | '/' | ',' | '|')
}

/// Whether `part` is a short name of `name`: one or more whole pieces of it between
/// separators (see [`is_name_separator`]), not all of it.
pub fn is_short_name_of(part: &str, name: &str) -> bool {
    if part.is_empty() || part.len() >= name.len() {
        return false;
    }
    name.match_indices(part).any(|(at, _)| {
        let end = at + part.len();
        let open = name[..at]
            .chars()
            .next_back()
            .map_or(true, is_name_separator);
        let close = name[end..].chars().next().map_or(true, is_name_separator);
        open && close
    })
}

/// The mark the TUI puts where it cut the middle out of a long name.
pub const ELISION: char = '…';

/// Whether `pattern`, a name with its middle cut out at [`ELISION`], fits `name`.
pub fn fits_elided(pattern: &str, name: &str) -> bool {
    let Some((head, tail)) = pattern.split_once(ELISION) else {
        return false;
    };
    name.len() > head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
}

/// Split what a user typed into a name and a port: `NAME[PORT]`, `"NAME"`, `"NAME"[PORT]`
/// (reports quote names). Text without a valid `[port]` is all name.
pub fn split_name_port(text: &str) -> (&str, Option<u8>) {
    let text = text.trim();
    let (base, port) = match text.strip_suffix(']').and_then(|t| t.rsplit_once('[')) {
        Some((base, port)) => match port.trim().parse::<u8>() {
            Ok(n) => (base.trim(), Some(n)),
            Err(_) => (text, None),
        },
        None => (text, None),
    };
    let unquoted = base
        .strip_prefix('"')
        .and_then(|b| b.strip_suffix('"'))
        .filter(|b| !b.contains('"'));
    (unquoted.unwrap_or(base), port)
}

/// Resolve `text` in `fabric` to one node or port; `names` is the node-name map, if any.
/// A server stands for its HCA when it has one, else it is an error that lists them.
pub fn resolve(
    fabric: &Fabric,
    names: Option<&NameMap>,
    text: &str,
    matching: NameMatch,
) -> Result<NamedTarget, ResolveError> {
    Resolver::new(fabric, names).resolve(text, matching)
}

/// Resolves many texts in one fabric, grouping its hosts once (for servers' names).
pub struct Resolver<'a> {
    fabric: &'a Fabric,
    names: Option<&'a NameMap>,
    hosts: OnceCell<Hosts>,
}

/// A name's node, or the server it names.
enum ByName {
    Node(NodeId),
    /// An index into the fabric's hosts.
    Server(usize),
}

impl<'a> Resolver<'a> {
    pub fn new(fabric: &'a Fabric, names: Option<&'a NameMap>) -> Self {
        Resolver {
            fabric,
            names,
            hosts: OnceCell::new(),
        }
    }

    fn hosts(&self) -> &Hosts {
        self.hosts
            .get_or_init(|| Hosts::group(self.fabric, self.names))
    }

    /// One node or port (see [`resolve`]).
    pub fn resolve(&self, text: &str, matching: NameMatch) -> Result<NamedTarget, ResolveError> {
        match self.resolve_any(text, matching)? {
            Resolved::Target(t) => Ok(t),
            Resolved::Server(s) => match s.hcas.as_slice() {
                [one] => Ok(NamedTarget::Port(one.end)),
                _ => Err(self.server_error(&s)),
            },
        }
    }

    /// A node, a port, or a server with its HCA ports.
    pub fn resolve_any(&self, text: &str, matching: NameMatch) -> Result<Resolved, ResolveError> {
        let (base, port) = split_name_port(text);
        if base.is_empty() {
            return Err(ResolveError::Empty);
        }
        let with_port = |node: NodeId| match port {
            None => Ok(Resolved::Target(NamedTarget::Node(node))),
            Some(p) => self
                .port(node, p)
                .map(|e| Resolved::Target(NamedTarget::Port(e))),
        };
        if is_route(base) {
            return with_port(self.by_route(base)?);
        }
        if let Some((name, guid)) = name_and_guid(base) {
            return with_port(self.by_name_and_guid(name, guid)?);
        }
        if let Some(hex) = base.strip_prefix("0x").or_else(|| base.strip_prefix("0X")) {
            if let Ok(n) = u64::from_str_radix(hex, 16) {
                return self.by_number(n, true, port);
            }
        } else if base.chars().all(|c| c.is_ascii_digit()) {
            let n = base.parse::<u64>().unwrap_or(u64::MAX);
            return self.by_number(n, false, port);
        }
        match self.by_name(base, matching)? {
            ByName::Node(node) => with_port(node),
            ByName::Server(i) => {
                let server = self.server(i);
                if port.is_some() {
                    return Err(self.server_error(&server));
                }
                Ok(Resolved::Server(server))
            }
        }
    }

    /// The flows from `src` to `dst`: between two ports, one; between two servers, one per
    /// rail both have (rail-local, as NCCL sends), from each HCA to its peer; between a
    /// server and a host's HCA port, the server's HCA on that port's rail. A server of one
    /// HCA port is that port.
    pub fn flows(&self, src: &Resolved, dst: &Resolved) -> Result<Vec<Flow>, ResolveError> {
        let fabric = self.fabric;
        let flow = |rail, src: End, dst: End| Flow { rail, src, dst };
        match (src, dst) {
            (Resolved::Target(a), Resolved::Target(b)) => {
                Ok(vec![flow(None, a.end(fabric), b.end(fabric))])
            }
            (Resolved::Server(s), Resolved::Target(t)) => {
                let (rail, from) = self.on_rail_of(s, t.end(fabric))?;
                Ok(vec![flow(rail, from, t.end(fabric))])
            }
            (Resolved::Target(t), Resolved::Server(s)) => {
                let (rail, to) = self.on_rail_of(s, t.end(fabric))?;
                Ok(vec![flow(rail, t.end(fabric), to)])
            }
            (Resolved::Server(a), Resolved::Server(b)) => {
                if let ([one], [other]) = (a.hcas.as_slice(), b.hcas.as_slice()) {
                    return Ok(vec![flow(None, one.end, other.end)]);
                }
                let flows: Vec<Flow> = a
                    .hcas
                    .iter()
                    .filter_map(|h| {
                        let rail = h.rail?;
                        let peer = b.hcas.iter().find(|o| o.rail == Some(rail))?;
                        Some(flow(Some(rail), h.end, peer.end))
                    })
                    .collect();
                if flows.is_empty() {
                    return Err(ResolveError::NoSharedRail {
                        a: escape::for_terminal(&a.name),
                        b: escape::for_terminal(&b.name),
                    });
                }
                Ok(flows)
            }
        }
    }

    /// The HCA port of server `s` on the rail of `other` (a host's HCA port), or its only
    /// one.
    fn on_rail_of(&self, s: &Server, other: End) -> Result<(Option<u8>, End), ResolveError> {
        if let [one] = s.hcas.as_slice() {
            return Ok((one.rail, one.end));
        }
        let key = self.fabric.node(other.node).port_key(other.port);
        let rail = self.hosts().label(key).and_then(|(_, rail)| rail);
        rail.and_then(|r| s.hcas.iter().find(|h| h.rail == Some(r)))
            .map(|h| (h.rail, h.end))
            .ok_or_else(|| self.server_error(s))
    }

    /// A list of names as users type one (`--hosts`, a file of names): separated by commas
    /// and new lines, and by spaces too unless the whole run between two commas is one
    /// name (`gpu-0001 mlx5_1`); a piece that names nothing but holds a Slurm bracket group
    /// expands as a hostlist (`gpu-[0001-0004]`; `R1L001[9]` stays a port). Whether each
    /// name names something is for the caller to resolve.
    pub fn name_list(&self, text: &str) -> Result<Vec<String>, HostlistError> {
        let names = |t: &str| self.resolve_any(t, NameMatch::Exact).is_ok();
        let mut out = Vec::new();
        for item in split_outside_brackets(text, |c| c == ',' || c == '\n') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let pieces: Vec<&str> = if names(item) {
                vec![item]
            } else {
                split_outside_brackets(item, char::is_whitespace)
            };
            for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
                if piece.contains('[') && !names(piece) {
                    out.extend(hostlist::expand(piece)?);
                } else {
                    out.push(piece.to_string());
                }
            }
        }
        Ok(out)
    }

    /// Port `port` of `node`, or an error naming the ports it has.
    pub fn port(&self, node: NodeId, port: u8) -> Result<End, ResolveError> {
        let n = self.fabric.node(node);
        if n.port(port).is_some() || (port >= 1 && port <= n.num_ports) {
            return Ok(End { node, port });
        }
        Err(ResolveError::NoPort {
            what: self.node_text(node),
            ports: match n.num_ports {
                0 => "none".into(),
                1 => "1".into(),
                count => format!("1-{count}"),
            },
            port,
        })
    }

    /// `"name" (0x…)`, escaped.
    fn node_text(&self, id: NodeId) -> String {
        let n = self.fabric.node(id);
        format!(
            "{} ({:#018x})",
            quoted_for_terminal(display_name(n, self.names)),
            n.guid
        )
    }

    fn server(&self, i: usize) -> Server {
        let host = &self.hosts().hosts()[i];
        Server {
            name: host.name.clone(),
            hcas: host
                .hcas
                .iter()
                .map(|h| ServerHca {
                    end: h.end(),
                    rail: h.rail,
                    device: h.device.clone(),
                })
                .collect(),
        }
    }

    /// A server where one port is needed: the error that lists its HCA ports as names
    /// this resolver takes.
    pub fn server_error(&self, s: &Server) -> ResolveError {
        ResolveError::Server {
            name: escape::for_terminal(&s.name),
            count: s.hcas.len(),
            hcas: self.hca_list(s),
        }
    }

    /// A server's HCA ports as names this resolver takes (escaped), the first few.
    fn hca_list(&self, s: &Server) -> String {
        let mut listed: Vec<String> = s
            .hcas
            .iter()
            .take(LISTED + 3)
            .map(|h| {
                let node = self.fabric.node(h.end.node);
                let name = escape::for_terminal(display_name(node, self.names));
                let several = s.hcas.iter().filter(|o| o.end.node == h.end.node).count() > 1;
                match several {
                    true => format!("{name}[{}]", h.end.port),
                    false => name,
                }
            })
            .collect();
        if s.hcas.len() > listed.len() {
            listed.push("...".into());
        }
        listed.join(", ")
    }

    /// A directed route from the local port: the node it reaches.
    fn by_route(&self, text: &str) -> Result<NodeId, ResolveError> {
        let fabric = self.fabric;
        let fail = |why: String| ResolveError::Route {
            path: escape::for_terminal(text),
            why,
        };
        let path = DrPath::parse(text).map_err(|e| fail(e.to_string()))?;
        let local = fabric
            .local
            .and_then(|k| {
                Some(End {
                    node: fabric.node_by_guid(k.guid)?,
                    port: k.port,
                })
            })
            .ok_or_else(|| fail("this fabric does not say which port discovered it".into()))?;
        let mut at = local.node;
        for (i, &port) in path.hops().iter().enumerate() {
            let node = fabric.node(at);
            if !node.is_switch() && (i > 0 || port != local.port) {
                return Err(fail(format!(
                    "{} is a CA: a route leaves it only by the local port {}",
                    self.node_text(at),
                    local.port
                )));
            }
            at = fabric
                .peer(End { node: at, port })
                .ok_or_else(|| fail(format!("port {port} of {} has no link", self.node_text(at))))?
                .node;
        }
        Ok(at)
    }

    /// A node as reports name one, `"name" (0x…)`: by its GUID (node or port), which must
    /// be that name's.
    fn by_name_and_guid(&self, name: &str, guid: u64) -> Result<NodeId, ResolveError> {
        let fabric = self.fabric;
        let id = fabric
            .node_by_guid(guid)
            .or_else(|| fabric.port_by_guid(guid).map(|e| e.node))
            .ok_or(ResolveError::NoGuid(guid))?;
        let node = fabric.node(id);
        if display_name(node, self.names) != name && node.description != name {
            return Err(ResolveError::NotThatGuid {
                guid,
                name: escape::for_terminal(name),
                shown: quoted_for_terminal(display_name(node, self.names)),
            });
        }
        Ok(id)
    }

    /// A number: a GUID (hex only, tried first) or a LID.
    fn by_number(&self, n: u64, hex: bool, port: Option<u8>) -> Result<Resolved, ResolveError> {
        let fabric = self.fabric;
        let with_port = |node: NodeId| -> Result<Resolved, ResolveError> {
            Ok(Resolved::Target(match port {
                None => NamedTarget::Node(node),
                Some(p) => NamedTarget::Port(self.port(node, p)?),
            }))
        };
        if hex {
            if let Some(id) = fabric.node_by_guid(n) {
                return with_port(id);
            }
            if let Some(end) = fabric.port_by_guid(n) {
                return match port {
                    None => Ok(Resolved::Target(NamedTarget::Port(end))),
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
            (Some(owner), None) => Ok(Resolved::Target(NamedTarget::Lid { lid, owner })),
            (Some(owner), Some(_)) => with_port(owner.node),
        }
    }

    /// A name, in the order the module's documentation gives.
    fn by_name(&self, name: &str, matching: NameMatch) -> Result<ByName, ResolveError> {
        let (fabric, names) = (self.fabric, self.names);
        let exact: Vec<NodeId> = fabric
            .nodes()
            .filter(|(_, n)| display_name(n, names) == name || n.description == name)
            .map(|(id, _)| id)
            .collect();
        if !exact.is_empty() {
            return self.one(name, exact).map(ByName::Node);
        }
        if let Some(id) = names
            .and_then(|m| m.alias(name))
            .and_then(|g| fabric.node_by_guid(g))
        {
            return Ok(ByName::Node(id));
        }
        if let Some(found) = self.by_host(name) {
            return Ok(found);
        }
        let fits = |test: &dyn Fn(&str) -> bool| -> Vec<NodeId> {
            fabric
                .nodes()
                .filter(|(_, n)| test(display_name(n, names)) || test(&n.description))
                .map(|(id, _)| id)
                .collect()
        };
        let short = fits(&|n| is_short_name_of(name, n));
        if !short.is_empty() {
            return self.one(name, short).map(ByName::Node);
        }
        if name.contains(ELISION) {
            let elided = fits(&|n| fits_elided(name, n));
            if !elided.is_empty() {
                return self.one(name, elided).map(ByName::Node);
            }
        }
        let needle = name.to_lowercase();
        let part = fits(&|n| n.to_lowercase().contains(&needle));
        if matching == NameMatch::ExactOrPart && !part.is_empty() {
            return self.one(name, part).map(ByName::Node);
        }
        Err(self.no_name(name, &part))
    }

    /// A server by its hostname, or one of its HCAs by `HOST DEVICE`.
    fn by_host(&self, name: &str) -> Option<ByName> {
        let hosts = self.hosts();
        if let Some(i) = hosts.find(name) {
            return Some(ByName::Server(i));
        }
        let (host, device) = name.rsplit_once(char::is_whitespace)?;
        let host = &hosts.hosts()[hosts.find(host.trim_end())?];
        let hca = host
            .hcas
            .iter()
            .find(|h| h.device.as_deref() == Some(device))?;
        Some(ByName::Node(hca.node))
    }

    /// The one node of `hits`, or an error listing them.
    fn one(&self, name: &str, hits: Vec<NodeId>) -> Result<NodeId, ResolveError> {
        if let [one] = hits.as_slice() {
            return Ok(*one);
        }
        let mut matches: Vec<String> = hits
            .iter()
            .take(LISTED)
            .map(|&id| self.node_text(id))
            .collect();
        if hits.len() > LISTED {
            matches.push(format!("and {} more", hits.len() - LISTED));
        }
        Err(ResolveError::Ambiguous {
            name: escape::for_terminal(name),
            matches: matches.join(", "),
        })
    }

    /// Nothing named `name`: the error, with the names that contain it (or, for a server's
    /// HCA it lacks, the HCAs it has).
    fn no_name(&self, name: &str, containing: &[NodeId]) -> ResolveError {
        let hosts = self.hosts();
        let server = name
            .rsplit_once(char::is_whitespace)
            .and_then(|(host, _)| hosts.find(host.trim_end()));
        if let Some(i) = server {
            let server = self.server(i);
            return ResolveError::NoName {
                name: escape::for_terminal(name),
                similar: format!(
                    "; server \"{}\" has {}",
                    escape::for_terminal(&server.name),
                    self.hca_list(&server)
                ),
            };
        }
        let mut similar: Vec<String> = containing
            .iter()
            .take(3)
            .map(|&id| quoted_for_terminal(display_name(self.fabric.node(id), self.names)))
            .collect();
        let needle = name.to_lowercase();
        for host in hosts.hosts() {
            let quoted = quoted_for_terminal(&host.name);
            if similar.len() < 6
                && host.name.to_lowercase().contains(&needle)
                && !similar.contains(&quoted)
            {
                similar.push(quoted);
            }
        }
        ResolveError::NoName {
            name: escape::for_terminal(name),
            similar: match similar.is_empty() {
                true => String::new(),
                false => format!("; names that contain it: {}", similar.join(", ")),
            },
        }
    }
}

/// `"name" (0x…)`, as reports name a node: the name and the GUID.
fn name_and_guid(text: &str) -> Option<(&str, u64)> {
    let (name, hex) = text.strip_suffix(')')?.rsplit_once(" (0x")?;
    let guid = u64::from_str_radix(hex, 16).ok()?;
    let name = name.strip_prefix('"')?.strip_suffix('"')?;
    Some((name, guid))
}

/// `text` cut at the characters `split` accepts that are outside `[...]`.
fn split_outside_brackets(text: &str, split: impl Fn(char) -> bool) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            c if depth == 0 && split(c) => {
                out.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// Ports separated by commas: a directed route.
fn is_route(text: &str) -> bool {
    text.contains(',')
        && text
            .split(',')
            .all(|p| !p.trim().is_empty() && p.trim().chars().all(|c| c.is_ascii_digit()))
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
        assert_eq!(
            part(&f, None, "sw[7]").unwrap_err().to_string(),
            "\"sw\" (0x0000000000200000) has ports 1-4; there is no port 7"
        );
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
            "nothing matches \"NODE-A\" (no node or server has that name; give a LID, a 0x \
             GUID, a directed route such as 0,1,3, a NodeDescription, a short name or a \
             node-name-map name); names that contain it: \"node-a\""
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

    /// Two servers of two rails each on one leaf, named as rdma-ndd names them, a switch
    /// described as Mellanox switches describe themselves, and a server of one HCA.
    const CLUSTER: &str = "\
Switch 8 \"L1\" # \"MF0;leaf-r0-001:MQM9700/U1\" base port 0 lid 1 lmc 0
[1] \"A0\"[1]
[2] \"A1\"[1]
[3] \"B0\"[1]
[4] \"B1\"[1]
[5] \"C0\"[1]
[6] \"L2\"[6]

Switch 8 \"L2\" # \"MF0;leaf-r1-001:MQM9700/U1\" base port 0 lid 2 lmc 0
[6] \"L1\"[6]

Hca 1 \"A0\" # \"gpu-0001 mlx5_0\"
[1] \"L1\"[1] # lid 3 lmc 0
Hca 1 \"A1\" # \"gpu-0001 mlx5_1\"
[1] \"L1\"[2] # lid 4 lmc 0
Hca 1 \"B0\" # \"gpu-0002 mlx5_0\"
[1] \"L1\"[3] # lid 5 lmc 0
Hca 1 \"B1\" # \"gpu-0002 mlx5_1\"
[1] \"L1\"[4] # lid 6 lmc 0
Hca 1 \"C0\" # \"login-1 mlx5_0\"
[1] \"L1\"[5] # lid 7 lmc 0
";

    fn cluster() -> (Fabric, NameMap) {
        let parsed = ibnd::parse_with_warnings(CLUSTER).unwrap();
        let mut aliases = NameMap::new();
        for (id, guid) in &parsed.node_ids {
            aliases.insert_alias(id.clone(), *guid);
        }
        (parsed.fabric, aliases)
    }

    fn desc(f: &Fabric, d: &str) -> NodeId {
        f.nodes_by_description(d)[0]
    }

    #[test]
    fn short_quoted_elided_and_aliased_names() {
        let (f, ids) = cluster();
        let exact = |t: &str| resolve(&f, Some(&ids), t, NameMatch::Exact);
        let leaf = desc(&f, "MF0;leaf-r0-001:MQM9700/U1");
        let port = |port| Ok(NamedTarget::Port(End { node: leaf, port }));
        assert_eq!(exact("leaf-r0-001"), Ok(NamedTarget::Node(leaf)));
        assert_eq!(exact("leaf-r0-001[4]"), port(4));
        assert_eq!(exact("\"MF0;leaf-r0-001:MQM9700/U1\"[4]"), port(4));
        assert_eq!(
            exact("\"MF0;leaf-r0-001:MQM9700/U1\""),
            Ok(NamedTarget::Node(leaf))
        );
        assert_eq!(exact("L1[4]"), port(4), "the topology file's node id");
        let guid = f.node(leaf).guid;
        let printed = format!("\"MF0;leaf-r0-001:MQM9700/U1\" ({guid:#018x})");
        assert_eq!(
            exact(&printed),
            Ok(NamedTarget::Node(leaf)),
            "as reports print it"
        );
        assert_eq!(exact(&format!("{printed}[4]")), port(4));
        let wrong = format!("\"leaf-x\" ({guid:#018x})");
        assert!(exact(&wrong)
            .unwrap_err()
            .to_string()
            .contains("not \"leaf-x\""));
        assert_eq!(
            exact("MF0;leaf-r0-…/U1[4]"),
            port(4),
            "the TUI's elided form"
        );
        let e = exact("MQM9700").unwrap_err().to_string();
        assert!(
            e.contains("matches several nodes") && e.contains("leaf-r1-001"),
            "{e}"
        );
        let e = exact("leaf-r0").unwrap_err().to_string();
        assert!(e.starts_with("nothing matches \"leaf-r0\""), "{e}");
        assert!(
            e.ends_with("names that contain it: \"MF0;leaf-r0-001:MQM9700/U1\""),
            "{e}"
        );
        let e = exact("leaf-r0-001[9]").unwrap_err().to_string();
        assert!(e.ends_with("has ports 1-8; there is no port 9"), "{e}");
    }

    #[test]
    fn servers_and_their_hcas() {
        let (f, _) = cluster();
        let r = Resolver::new(&f, None);
        let a1 = desc(&f, "gpu-0001 mlx5_1");
        assert_eq!(
            r.resolve("gpu-0001 mlx5_1", NameMatch::Exact),
            Ok(NamedTarget::Node(a1))
        );
        let Ok(Resolved::Server(s)) = r.resolve_any("gpu-0001", NameMatch::Exact) else {
            panic!("a server");
        };
        assert_eq!(s.name, "gpu-0001");
        assert_eq!(
            s.hcas.iter().map(|h| h.rail).collect::<Vec<_>>(),
            [Some(0), Some(1)]
        );
        assert_eq!(
            r.resolve("gpu-0001", NameMatch::Exact)
                .unwrap_err()
                .to_string(),
            "\"gpu-0001\" is a server with 2 HCA ports (gpu-0001 mlx5_0, gpu-0001 mlx5_1): \
             name one of them"
        );
        let c0 = desc(&f, "login-1 mlx5_0");
        assert_eq!(
            r.resolve("login-1", NameMatch::Exact),
            Ok(NamedTarget::Port(End { node: c0, port: 1 })),
            "a server of one HCA port is that port"
        );
        assert!(r.resolve("gpu-0001[1]", NameMatch::Exact).is_err());
    }

    #[test]
    fn flows_between_servers_go_rail_by_rail() {
        let (f, _) = cluster();
        let r = Resolver::new(&f, None);
        let any = |t: &str| r.resolve_any(t, NameMatch::Exact).unwrap();
        let end = |d: &str| End {
            node: desc(&f, d),
            port: 1,
        };
        let flows = r.flows(&any("gpu-0001"), &any("gpu-0002")).unwrap();
        let want = |rail, a, b| Flow {
            rail: Some(rail),
            src: end(a),
            dst: end(b),
        };
        assert_eq!(
            flows,
            [
                want(0, "gpu-0001 mlx5_0", "gpu-0002 mlx5_0"),
                want(1, "gpu-0001 mlx5_1", "gpu-0002 mlx5_1")
            ]
        );
        let one = r.flows(&any("gpu-0001"), &any("gpu-0002 mlx5_1")).unwrap();
        assert_eq!(one, [want(1, "gpu-0001 mlx5_1", "gpu-0002 mlx5_1")]);
        let to_login = r.flows(&any("gpu-0001 mlx5_0"), &any("login-1")).unwrap();
        assert_eq!(to_login.len(), 1);
        assert_eq!(to_login[0].dst, end("login-1 mlx5_0"));
        let shared = r.flows(&any("gpu-0001"), &any("login-1")).unwrap();
        assert_eq!(shared, [want(0, "gpu-0001 mlx5_0", "login-1 mlx5_0")]);
        let e = r.flows(&any("gpu-0001"), &any("leaf-r1-001")).unwrap_err();
        assert!(
            e.to_string().contains("is a server with 2 HCA ports"),
            "{e}"
        );
    }

    #[test]
    fn lists_of_names_keep_spaces_that_belong_to_a_name() {
        let (f, ids) = cluster();
        let r = Resolver::new(&f, Some(&ids));
        let list = |t: &str| r.name_list(t).unwrap();
        assert_eq!(
            list("gpu-0001 mlx5_1,gpu-0002 mlx5_0"),
            ["gpu-0001 mlx5_1", "gpu-0002 mlx5_0"]
        );
        assert_eq!(
            list("gpu-000[1-2] login-1"),
            ["gpu-0001", "gpu-0002", "login-1"]
        );
        assert_eq!(
            list("L1[4],gpu-[0001,0002]\n# x"),
            ["L1[4]", "gpu-0001", "gpu-0002", "#", "x"]
        );
        assert!(r.name_list("gpu-[0001").is_err());
    }

    #[test]
    fn directed_routes_walk_the_links() {
        let text =
            format!("# Initiated from node 0000000000100000 port 0000000000100001\n{CLUSTER}");
        let f = ibnd::parse(&text).unwrap();
        let exact = |t: &str| resolve(&f, None, t, NameMatch::Exact);
        let a0 = desc(&f, "gpu-0001 mlx5_0");
        assert_eq!(f.node(a0).guid, 0x100000);
        assert!(exact("0,").is_err());
        assert_eq!(
            exact("0,1"),
            Ok(NamedTarget::Node(desc(&f, "MF0;leaf-r0-001:MQM9700/U1")))
        );
        assert_eq!(
            exact("0,1,6"),
            Ok(NamedTarget::Node(desc(&f, "MF0;leaf-r1-001:MQM9700/U1")))
        );
        assert_eq!(
            exact("0,1,3"),
            Ok(NamedTarget::Node(desc(&f, "gpu-0002 mlx5_0")))
        );
        let e = exact("0,1,7").unwrap_err().to_string();
        assert!(
            e.starts_with("directed route 0,1,7: port 7 of \"MF0;leaf-r0-001"),
            "{e}"
        );
        let e = exact("0,1,3,1").unwrap_err().to_string();
        assert!(e.contains("is a CA"), "{e}");
        let e = resolve(&cluster().0, None, "0,1", NameMatch::Exact)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not say which port discovered it"), "{e}");
    }

    #[test]
    fn pieces_of_names() {
        let name = "MF0;leaf-r4-001:MQM9700/U1";
        for part in ["leaf-r4-001", "MF0", "U1", "MQM9700/U1", "MF0;leaf-r4-001"] {
            assert!(is_short_name_of(part, name), "{part}");
        }
        for part in ["leaf", "r4-001", "MF0;leaf-r4-001:MQM9700/U1", "", "9700"] {
            assert!(!is_short_name_of(part, name), "{part}");
        }
        assert!(is_short_name_of("gpu-0001", "gpu-0001 mlx5_0"));
        assert!(fits_elided(
            "MF0;leaf-r6-…/U1",
            "MF0;leaf-r6-001:MQM9700/U1"
        ));
        assert!(!fits_elided(
            "MF0;leaf-r6-…/U2",
            "MF0;leaf-r6-001:MQM9700/U1"
        ));
        assert!(!fits_elided("ab…ba", "aba"));
        assert_eq!(split_name_port("\"a b\"[3]"), ("a b", Some(3)));
        assert_eq!(split_name_port(" x[y] "), ("x[y]", None));
        assert_eq!(split_name_port("\"a\"b\""), ("\"a\"b\"", None));
    }
}
